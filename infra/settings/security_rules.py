"""Settings that `pulumi up` would accept and that hurt: an API server open to most of the
internet, a job in a system namespace or under the namespace's default service account, a mount
over a path the runtime owns, tags a cloud refuses, an unbounded checkpoint count, the data
folder at the mount's root (issue 33). Each rule names the setting, the value, what is allowed
and the command that fixes it, as every rule in rules.py does."""

from __future__ import annotations

import ipaddress
import posixpath
import re
from collections.abc import Iterator

from infra.catalog import Cloud
from infra.settings.errors import Problem
from infra.settings.model import Settings

# The broadest API range taken without kubernetes.allowBroadApiAccess: a /16 is a large
# office or campus; anything wider (0.0.0.0/1 + 128.0.0.0/1 is all of IPv4) admits strangers.
BROADEST_API_PREFIX = {4: 16, 6: 48}
# Namespaces Kubernetes itself uses (kube-system, kube-public, kube-node-lease) or that every
# cluster has (default): the stack's `Namespace` would fail with AlreadyExists after the cluster
# is paid for, and a job there shares its service accounts and quotas with the cluster's own.
RESERVED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# Namespaces the stack's own add-ons create (workloads/kueue.py NAMESPACE, the vendored JobSet
# manifests, infra/dcgm.py GPU_OPERATOR_NAMESPACE, Azure's network operator, the training
# operator in infra/webhooks.py; tests/test_security.py holds them to those constants), and
# Kubernetes' own `kube-` prefix: a job there collides with them after the cluster is paid for.
ADDON_NAMESPACES = ("kueue-system", "jobset-system", "gpu-operator", "network-operator",
                    "kubeflow")
# Paths the container runtime or the pod spec itself mounts: a second volume there is refused
# by the API server (duplicate mount path) or hides what the runtime put there.
RUNTIME_PATHS = ("/tmp", "/dev", "/dev/shm", "/proc", "/sys", "/etc", "/run", "/var/run",
                 "/usr", "/bin", "/sbin", "/lib", "/lib64", "/var/lib/kubelet")
RUNTIME_TREES = ("/dev", "/proc", "/sys", "/run", "/var/run")  # nothing of ours goes below them
# The trainer image's own folders (trainer/Dockerfile: WORKDIR /app on PYTHONPATH, the base
# image's Python under /opt, HOME=/home/trainer): a volume there hides the trainer from itself.
IMAGE_PATHS = ("/app", "/opt", "/home", "/root")
KEEP_MAX = 1000  # newest checkpoints kept: more is a typo (1e12), each one costs a full save
# Tag rules: AWS (https://docs.aws.amazon.com/tag-editor/latest/userguide/tagging.html: key
# 1-128, value 0-256, `aws:` reserved), GCP labels (https://cloud.google.com/compute/docs/
# labeling-resources: key 1-63 starting with a lowercase letter, lowercase letters, digits,
# '_' and '-', value 0-63 of the same), Azure (https://learn.microsoft.com/azure/
# azure-resource-manager/management/tag-resources#limitations: name 1-512, value 0-256, no
# < > % & \ ? / in names, `microsoft`, `azure`, `windows` prefixes reserved).
AWS_TAG = re.compile(r"^[\w .:/=+\-@]*$", re.UNICODE)
# At most 50 user tags per AWS resource; `aws:`-prefixed ones do not count
# (https://docs.aws.amazon.com/tag-editor/latest/userguide/tagging.html, "Maximum tags per
# resource"). The stack's tags go on every resource (the provider's default tags), beside the
# most the program and EKS put on one resource themselves: a GPU instance carries the
# interruption handler's tag (infra/aws/interruption.py managed_tag) and the five EKS puts on
# a managed node group's instances (eks:cluster-name, eks:nodegroup-name,
# kubernetes.io/cluster/<cluster>, k8s.io/cluster-autoscaler/enabled and
# k8s.io/cluster-autoscaler/<cluster>; https://docs.aws.amazon.com/eks/latest/userguide/
# managed-node-groups.html, "Managed node groups concepts").
AWS_TAGS_PER_RESOURCE = 50
AWS_OWN_TAGS = 1 + 5
GCP_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
GCP_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
AZURE_TAG_NAME_FORBIDDEN = set('<>%&\\?/')


def api_access_is_not_most_of_the_internet(s: Settings) -> Iterator[Problem]:
    if s.kubernetes.allow_broad_api_access:
        return
    for index, cidr in enumerate(s.kubernetes.api_access_cidrs):
        network = ipaddress.ip_network(cidr)
        broadest = BROADEST_API_PREFIX[network.version]
        if network.prefixlen < broadest:
            yield Problem(
                f"kubernetes.apiAccessCidrs[{index}]", cidr,
                f"a /{network.prefixlen} admits {network.num_addresses:,} addresses to the API "
                f"server; at most a /{broadest} unless you mean it: name your own address with "
                f"`pulumi config set --path 'kubernetes.apiAccessCidrs[{index}]' "
                "\"$(curl -s https://checkip.amazonaws.com)/32\"`, or opt in with "
                "`pulumi config set --path kubernetes.allowBroadApiAccess true`")


def job_namespace_is_its_own(s: Settings) -> Iterator[Problem]:
    taken = (*RESERVED_NAMESPACES, *ADDON_NAMESPACES)
    if s.job.namespace in taken or s.job.namespace.startswith("kube-"):
        yield Problem("job.namespace", s.job.namespace,
                      f"a namespace of the job's own, not {', '.join(taken)} or kube-* "
                      "(the stack creates it; those exist in every cluster or hold the "
                      "stack's add-ons): "
                      "`pulumi config set --path job.namespace torchrec`")


def job_service_account_is_its_own(s: Settings) -> Iterator[Problem]:
    if s.job.service_account == "default":
        yield Problem("job.serviceAccount", "default",
                      "a service account of the job's own: every pod in the namespace runs as "
                      "'default', so each would get the bucket identity and the node-patch "
                      "rights: `pulumi config set --path job.serviceAccount trainer`")


def mount_path_is_not_the_runtime_s(s: Settings) -> Iterator[Problem]:
    raw = s.shared_file_system.mount_path
    if ".." in raw.split("/") or "//" in raw:
        yield Problem("sharedFileSystem.mountPath", raw,
                      "a plain absolute path without '..' or '//' (the runtime resolves them: "
                      "/mnt/../etc is /etc): "
                      "`pulumi config set --path sharedFileSystem.mountPath /mnt/shared`")
        return
    path = posixpath.normpath(raw) if raw.startswith("/") else raw.rstrip("/") or "/"
    owned = next((p for p in (*RUNTIME_PATHS, *IMAGE_PATHS) if path == p or (
        p in (*RUNTIME_TREES, *IMAGE_PATHS) and path.startswith(p + "/"))), None)
    if owned:
        yield Problem("sharedFileSystem.mountPath", s.shared_file_system.mount_path,
                      f"a folder of its own, not {path if path == owned else f'{path} (in {owned})'} "
                      "(the container runtime mounts it, or "
                      "the image needs it): "
                      "`pulumi config set --path sharedFileSystem.mountPath /mnt/shared`")


def checkpoints_keep_is_bounded(s: Settings) -> Iterator[Problem]:
    if s.checkpoints.keep > KEEP_MAX:
        yield Problem("checkpoints.keep", s.checkpoints.keep,
                      f"1 to {KEEP_MAX} newest checkpoints (each is a full copy of the model): "
                      "`pulumi config set --path checkpoints.keep 3`")


def dataset_path_is_a_folder(s: Settings) -> Iterator[Problem]:
    path = s.dataset.path
    if path and all(part in ("", ".") for part in path.split("/")):
        yield Problem("dataset.path", path,
                      "a folder under the mount, not the mount itself (the trainer's runs/ and "
                      "the checkpoints live there too): "
                      "`pulumi config set --path dataset.path criteo`")


def tags_fit_the_cloud(s: Settings) -> Iterator[Problem]:
    for key, value in s.tags.items():
        why = _tag_problem(s.cloud, key, value)
        if why:
            yield Problem(f"tags.{key}", value,
                          f"{why}; remove it with `pulumi config rm --path 'tags.{key}'` and "
                          "set it again with a name and value the cloud takes")


def aws_tags_fit_beside_the_stack_s_own(s: Settings) -> Iterator[Problem]:
    room = AWS_TAGS_PER_RESOURCE - AWS_OWN_TAGS
    if s.cloud == Cloud.AWS and len(s.tags) > room:
        yield Problem("tags", f"{len(s.tags)} tags",
                      f"at most {room}: AWS takes {AWS_TAGS_PER_RESOURCE} tags per resource and "
                      f"the stack and EKS put up to {AWS_OWN_TAGS} of their own on a GPU "
                      "instance; remove some with `pulumi config rm --path 'tags.<key>'`")


def gcp_label(key: str) -> str:
    """What a tag key becomes as a GCP label if it is mended: lower case, and every character
    GCP refuses ('.', '/', ' ', ...) as '_'."""
    return re.sub(r"[^a-z0-9_-]", "_", key.lower())


def gcp_labels_do_not_collide(s: Settings) -> Iterator[Problem]:
    """Two keys that read as one label once mended (team_a and team.a, Team and team): the
    mended one would silently overwrite the other, so both are named."""
    if s.cloud != Cloud.GCP:
        return
    by_label: dict[str, list[str]] = {}
    for key in s.tags:
        by_label.setdefault(gcp_label(key), []).append(key)
    for label, keys in sorted(by_label.items()):
        if len(keys) > 1:
            named = " and ".join(f"tags.{k}" for k in sorted(keys))
            yield Problem(f"tags.{sorted(keys)[-1]}", s.tags[sorted(keys)[-1]],
                          f"{named} are one GCP label once made valid ({label!r}: labels take "
                          "lowercase letters, digits, '_' and '-' only); keep one: "
                          f"`pulumi config rm --path 'tags.{sorted(keys)[-1]}'`")


# OCI image references as Docker and containerd parse them (distribution/reference
# regexp.go, https://github.com/distribution/reference/blob/main/regexp.go):
# [host[:port]/]path-component(/path-component)* [:tag] [@algorithm:hex].
_ALNUM = r"[a-z0-9]+"
_PATH_COMPONENT = rf"{_ALNUM}(?:(?:[._]|__|-+){_ALNUM})*"
_HOST_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_HOST_COMPONENT}(?:\.{_HOST_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
IMAGE_REFERENCE = re.compile(
    rf"^(?:{_HOST}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
    r"(?::[\w][\w.-]{0,127})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$")
IMAGE_NAME_MAX = 255  # the name part (before ':tag' and '@digest'), distribution/reference


def job_image_is_an_image_reference(s: Settings) -> Iterator[Problem]:
    image = s.job.image
    if not image:
        return
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: len(name) - len(last) + last.index(":")]
    if IMAGE_REFERENCE.match(image) and len(name) <= IMAGE_NAME_MAX:
        if "@sha256:" not in image or re.search(r"@sha256:[0-9a-f]{64}$", image):
            return
    yield Problem("job.image", image,
                  "an image reference as the registry takes it: [registry[:port]/]name[:tag]"
                  "[@sha256:<64 hex>], the name in lowercase letters, digits and . _ - "
                  "separators: `pulumi config set --path job.image "
                  "ghcr.io/acme/trainer@sha256:<digest>` (`docker buildx imagetools inspect "
                  "<image>` prints the digest), or leave it empty to build trainer/Dockerfile")


def _tag_problem(cloud: Cloud, key: str, value: str) -> str:
    if cloud == Cloud.AWS:
        if not 1 <= len(key) <= 128 or len(value) > 256:
            return "AWS tags: a key of 1-128 characters, a value of at most 256"
        if key.lower().startswith("aws:"):
            return "AWS reserves tag keys starting with 'aws:'"
        if not AWS_TAG.match(key) or not AWS_TAG.match(value):
            return "AWS tags: letters, digits, spaces and _ . : / = + - @ only"
    elif cloud == Cloud.GCP:
        if not GCP_LABEL_KEY.match(key) or not GCP_LABEL_VALUE.match(value):
            return ("GCP labels: a key of 1-63 lowercase letters, digits, '_' or '-' starting "
                    "with a letter, a value of at most 63 of the same")
    elif cloud == Cloud.AZURE:
        if not 1 <= len(key) <= 512 or len(value) > 256:
            return "Azure tags: a name of 1-512 characters, a value of at most 256"
        if AZURE_TAG_NAME_FORBIDDEN & set(key):
            return "Azure tag names may not hold < > % & \\ ? /"
        if key.lower().startswith(("microsoft", "azure", "windows")):
            return "Azure reserves tag names starting with microsoft, azure or windows"
    return ""


def unpinned_image_notice(s: Settings) -> str:
    """A warning, not a refusal: a tag (`:latest`, or none) can point at another image
    tomorrow, so two nodes of one gang may run different code. Empty when pinned or built."""
    image = s.job.image
    if not image or "@sha256:" in image:
        return ""
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    how = "`:latest`" if tag == "latest" else f"tag `:{tag}` only" if tag else "no tag"
    return (f"job.image {image!r} is not pinned ({how}): a tag can be moved to another image, "
            "so each node may pull different code. Pin it by digest: `docker buildx imagetools inspect "
            f"{image}` prints it; then `pulumi config set --path job.image "
            f"{image.split('@')[0]}@sha256:<digest>`")


SECURITY_RULES = (api_access_is_not_most_of_the_internet, job_namespace_is_its_own,
                  job_service_account_is_its_own, mount_path_is_not_the_runtime_s,
                  checkpoints_keep_is_bounded, dataset_path_is_a_folder, tags_fit_the_cloud,
                  aws_tags_fit_beside_the_stack_s_own, gcp_labels_do_not_collide,
                  job_image_is_an_image_reference)
