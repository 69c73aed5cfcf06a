"""Settings that `pulumi up` would accept and that hurt: an API server open to most of the
internet, a job in a system namespace or under the namespace's default service account, a mount
over a path the runtime owns, tags a cloud refuses, an unbounded checkpoint count, the data
folder at the mount's root (issue 33). Each rule names the setting, the value, what is allowed
and the command that fixes it, as every rule in rules.py does."""

from __future__ import annotations

import ipaddress
import posixpath
import re
import shlex
from collections.abc import Iterator

from infra.catalog.cloud import Cloud
from infra.settings.errors import Problem, rm_command, set_command
from infra.settings.model.api_access import IPV4_IN_IPV6, ipv4_equivalent
from infra.settings.model.stack_file import Settings

# The broadest API range taken without kubernetes.allowBroadApiAccess: a /16 is a large
# office or campus; anything wider (0.0.0.0/1 + 128.0.0.0/1 is all of IPv4) admits strangers.
BROADEST_API_PREFIX = {4: 16, 6: 48}
# IPv4 written as IPv6 (infra/settings/model/api_access.py IPV4_IN_IPV6): `::ffff:0.0.0.0/96` is all of IPv4
# and passes a /48 limit, so a range inside one is judged by the IPv4 limit on the IPv4 range it
# stands for (ipv4_equivalent, as the private-range check does), and a range holding one whole
# (`::/80`) as all of IPv4.
# The most apiAccessCidrs each control plane takes: EKS "Public endpoint access CIDR ranges per
# cluster" 40, not adjustable (https://docs.aws.amazon.com/eks/latest/userguide/
# service-quotas.html); GKE authorized networks "up to 50 CIDR ranges" for a public endpoint
# such as this stack's (https://cloud.google.com/kubernetes-engine/docs/concepts/
# multitenancy-overview, "Restrict network access to the control plane"); AKS "up to 200
# authorized IP ranges" (https://learn.microsoft.com/azure/aks/api-server-authorized-ip-ranges,
# "Limitations and considerations"). More is refused by the cloud after the network is paid for.
API_CIDRS_MAX = {Cloud.AWS: 40, Cloud.GCP: 50, Cloud.AZURE: 200}
# Namespaces Kubernetes itself uses (kube-system, kube-public, kube-node-lease) or that every
# cluster has (default): the stack's `Namespace` would fail with AlreadyExists after the cluster
# is paid for, and a job there shares its service accounts and quotas with the cluster's own.
RESERVED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# Namespaces each cloud creates in its clusters for the add-ons it manages, by name and by
# prefix: GKE's Managed Service for Prometheus (gmp-system, gmp-public: "do not modify or deploy
# anything in this namespace", https://cloud.google.com/stackdriver/docs/managed-prometheus/
# setup-managed) and gke-managed-* (gke-managed-system, gke-managed-filestorecsi, ...: `gke-`);
# AKS's Calico network policy (calico-system, tigera-operator), application routing
# (app-routing-system) and aks-* (aks-command, aks-istio-system); EKS add-ons (amazon-cloudwatch,
# amazon-guardduty, aws-observability for Fargate logging: `amazon-`, `aws-`).
CLOUD_NAMESPACES: dict[Cloud, tuple[tuple[str, ...], tuple[str, ...]]] = {
    Cloud.GCP: (("gmp-system", "gmp-public"), ("gke-",)),
    Cloud.AZURE: (("calico-system", "tigera-operator", "app-routing-system"), ("aks-",)),
    Cloud.AWS: ((), ("amazon-", "aws-")),
}
# Namespaces the stack's own add-ons create (workloads/kueue.py NAMESPACE, the vendored JobSet
# manifests, infra/dcgm.py GPU_OPERATOR_NAMESPACE, Azure's network operator, the training
# operator in infra/webhooks.py; tests/test_security.py holds them to those constants), and
# Kubernetes' own `kube-` prefix: a job there collides with them after the cluster is paid for.
ADDON_NAMESPACES = ("kueue-system", "jobset-system", "gpu-operator", "network-operator",
                    "kubeflow")
# Paths the container runtime or the pod spec itself mounts: a second volume there is refused
# by the API server (duplicate mount path) or hides what the runtime put there.
RUNTIME_PATHS = ("/tmp", "/dev", "/dev/shm", "/proc", "/sys", "/etc", "/run", "/var/run",
                 "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/var",
                 "/var/lib/kubelet")
# Nothing of ours goes below them: the runtime writes /etc/hosts, /etc/resolv.conf and
# /etc/hostname, the image keeps its CA certificates in /etc/ssl and its libraries and programs
# in /usr (/usr/local), /lib*, /bin and /sbin, and /var/run holds the service account token.
RUNTIME_TREES = ("/dev", "/proc", "/sys", "/run", "/var/run", "/etc", "/usr", "/var", "/bin",
                 "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The trainer image's own folders (trainer/Dockerfile: WORKDIR /app on PYTHONPATH, the base
# image's Python under /opt, HOME=/home/trainer): a volume there hides the trainer from itself.
IMAGE_PATHS = ("/app", "/opt", "/home", "/root")
# The job's own folders under the mount (workloads/pod.py job_folders: runs/<job>,
# checkpoints/<job>): a dataset there mixes with the trainer's metrics or checkpoints, and the
# preparation would write into them.
JOB_FOLDERS = ("runs", "checkpoints")
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
# Azure: at most 50 tag name/value pairs per resource (https://learn.microsoft.com/azure/
# azure-resource-manager/management/tag-resources#limitations). The most the program puts on one
# resource itself is a spot GPU pool's scale set: the autoscaler's node-template tags for the GPU
# and rdma/ib resources, three labels and two taints (infra/azure/node_pools.py
# scale_from_zero_tags); AKS adds its own aks-managed-* tags to that scale set, for which 10
# more are kept free.
AZURE_TAGS_PER_RESOURCE = 50
AZURE_OWN_TAGS = 7 + 10
# GCP: at most 64 labels per resource (https://cloud.google.com/compute/docs/labeling-resources,
# "Requirements for labels"). The program's own is the bucket's owner label
# (infra/store_owner.py); GKE puts its goog-* labels on the node VMs (goog-gke-node,
# goog-k8s-cluster-name, goog-k8s-cluster-location, goog-k8s-node-pool-name, ...), for which 10
# are kept free in all.
GCP_LABELS_PER_RESOURCE = 64
GCP_OWN_LABELS = 10
# The tag key that says which stack owns a checkpoint store (infra/store_owner.py OWNER_KEY,
# which imports pulumi, so the text is repeated here and held equal by tests/test_security.py)
# and the prefix of the program's own tags and labels (torchrec-cloud/pool, .../final-backup-of):
# a user tag of that key would claim another stack's store, or overwrite the program's.
OWNER_TAG_KEY = "torchrec-cloud-stack"
OWN_TAG_PREFIX = "torchrec-cloud/"
# Nodes per pool each cloud takes: EKS "Nodes per managed node group" 450 (the default of an
# adjustable quota, https://docs.aws.amazon.com/eks/latest/userguide/service-quotas.html); AKS
# agent pool count and maxCount 0-1000 (https://learn.microsoft.com/rest/api/aks/agent-pools/
# create-or-update); GKE "Nodes per node pool zone" 1,000
# (https://cloud.google.com/kubernetes-engine/quotas), maxNodes being the per-zone
# max_node_count (infra/gcp/node_pools.py).
POOL_NODES_MAX = {Cloud.AWS: 450, Cloud.AZURE: 1000, Cloud.GCP: 1000}
GCP_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
GCP_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
AZURE_TAG_NAME_FORBIDDEN = set('<>%&\\?/')


def _ipv4_prefix(network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> int | None:
    """The IPv4 prefix length an IPv6 range stands for when it carries IPv4 addresses
    (IPV4_IN_IPV6): `::ffff:0.0.0.0/96` -> 0; None for a range of IPv6 addresses only."""
    as_ipv4 = ipv4_equivalent(network)
    if as_ipv4 is not None:
        return as_ipv4.prefixlen
    if network.version == 6 and any(network.supernet_of(e)  # type: ignore[arg-type]
                                    for e in IPV4_IN_IPV6):
        return 0
    return None


def api_access_is_not_most_of_the_internet(s: Settings) -> Iterator[Problem]:
    if s.kubernetes.allow_broad_api_access:
        return
    for index, cidr in enumerate(s.kubernetes.api_access_cidrs):
        network = ipaddress.ip_network(cidr)
        broadest = BROADEST_API_PREFIX[network.version]
        prefix, addresses = network.prefixlen, network.num_addresses
        as_ipv4 = _ipv4_prefix(network)
        if as_ipv4 is not None:  # IPv4 in IPv6 clothing: IPv4's limit, IPv4's count
            prefix, broadest, addresses = as_ipv4, BROADEST_API_PREFIX[4], 2 ** (32 - as_ipv4)
        if prefix < broadest:
            yield Problem(
                f"kubernetes.apiAccessCidrs[{index}]", cidr,
                f"a /{prefix}{' of IPv4 (IPv4 addresses written as IPv6)' if as_ipv4 is not None else ''} "
                f"admits {addresses:,} addresses to the API "
                f"server; at most a /{broadest} unless you mean it: name your own address with "
                f"`pulumi config set --path 'kubernetes.apiAccessCidrs[{index}]' "
                "\"$(curl -s https://checkip.amazonaws.com)/32\"`, or opt in with "
                "`pulumi config set --path kubernetes.allowBroadApiAccess true`")


def api_access_cidrs_fit_the_control_plane(s: Settings) -> Iterator[Problem]:
    most = API_CIDRS_MAX[s.cloud]
    count = len(s.kubernetes.api_access_cidrs)
    if count > most:
        yield Problem("kubernetes.apiAccessCidrs", f"{count} ranges",
                      f"at most {most}: the {s.cloud.value} control plane takes no more (the "
                      "cloud refuses the rest after the network is made); join neighbouring "
                      "ranges or keep the addresses that run `pulumi up` and kubectl, and remove "
                      f"the others with `{rm_command('kubernetes.apiAccessCidrs[<index>]')}`")


def job_namespace_is_its_own(s: Settings) -> Iterator[Problem]:
    taken = (*RESERVED_NAMESPACES, *ADDON_NAMESPACES)
    if s.job.namespace in taken or s.job.namespace.startswith("kube-"):
        yield Problem("job.namespace", s.job.namespace,
                      f"a namespace of the job's own, not {', '.join(taken)} or kube-* "
                      "(the stack creates it; those exist in every cluster or hold the "
                      "stack's add-ons): "
                      "`pulumi config set --path job.namespace torchrec`")


def job_namespace_is_not_the_cloud_s(s: Settings) -> Iterator[Problem]:
    names, prefixes = CLOUD_NAMESPACES[s.cloud]
    namespace = s.job.namespace
    if namespace in names or namespace.startswith(prefixes):
        taken = ", ".join((*names, *(f"{p}*" for p in prefixes)))
        yield Problem("job.namespace", namespace,
                      f"a namespace of the job's own, not one {s.cloud.value}'s managed add-ons "
                      f"create or may create ({taken}): "
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
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if path and not parts:
        yield Problem("dataset.path", path,
                      "a folder under the mount, not the mount itself (the trainer's runs/ and "
                      "the checkpoints live there too): "
                      "`pulumi config set --path dataset.path criteo`")
    elif parts and parts[0] in JOB_FOLDERS:
        yield Problem("dataset.path", path,
                      f"a folder apart from the job's own {' and '.join(f + '/' for f in JOB_FOLDERS)} "
                      "under the mount (the trainer writes its metrics and checkpoints there): "
                      "`pulumi config set --path dataset.path criteo`")


def tags_fit_the_cloud(s: Settings) -> Iterator[Problem]:
    for key, value in s.tags.items():
        why = _tag_problem(s.cloud, key, value)
        if why:
            yield Problem(f"tags.{key}", value,
                          f"{why}; remove it with `{rm_command(f'tags.{key}')}` and "
                          "set it again with a name and value the cloud takes")


def aws_tags_fit_beside_the_stack_s_own(s: Settings) -> Iterator[Problem]:
    room = AWS_TAGS_PER_RESOURCE - AWS_OWN_TAGS
    if s.cloud == Cloud.AWS and len(s.tags) > room:
        yield Problem("tags", f"{len(s.tags)} tags",
                      f"at most {room}: AWS takes {AWS_TAGS_PER_RESOURCE} tags per resource and "
                      f"the stack and EKS put up to {AWS_OWN_TAGS} of their own on a GPU "
                      "instance; remove some with `pulumi config rm --path 'tags.<key>'`")


def azure_and_gcp_tags_fit_beside_the_stack_s_own(s: Settings) -> Iterator[Problem]:
    limits = {Cloud.AZURE: ("Azure", "tags", AZURE_TAGS_PER_RESOURCE, AZURE_OWN_TAGS,
                            "AKS and the stack put"),
              Cloud.GCP: ("GCP", "labels", GCP_LABELS_PER_RESOURCE, GCP_OWN_LABELS,
                          "GKE and the stack put")}
    if s.cloud not in limits:
        return
    name, kind, most, own, who = limits[s.cloud]
    if len(s.tags) > most - own:
        yield Problem("tags", f"{len(s.tags)} tags",
                      f"at most {most - own}: {name} takes {most} {kind} per resource and "
                      f"{who} up to {own} of their own on one; remove some with "
                      "`pulumi config rm --path 'tags.<key>'`")


def tags_are_not_the_stack_s_own(s: Settings) -> Iterator[Problem]:
    for key, value in s.tags.items():
        if key.lower() == OWNER_TAG_KEY or key.lower().startswith(OWN_TAG_PREFIX):
            yield Problem(f"tags.{key}", value,
                          f"the stack's own tag ({OWNER_TAG_KEY} names the stack that owns a "
                          f"checkpoint store; {OWN_TAG_PREFIX}* are the program's): another "
                          "name, after removing this one with "
                          f"`{rm_command(f'tags.{key}')}`")


def pools_fit_the_cloud_s_node_limit(s: Settings) -> Iterator[Problem]:
    """AKS's and GKE's limits are fixed; EKS's is a quota that can be raised, so on AWS
    `quota.pending: true` (the user says an increase is asked for) lets a larger pool through."""
    if s.cloud == Cloud.AWS and s.quota.pending:
        return
    most = POOL_NODES_MAX[s.cloud]
    where = {Cloud.AWS: "EKS managed node group (EKS's quota 'Nodes per managed node group', "
                        "450 unless raised: with a raise asked for in Service Quotas, "
                        "`pulumi config set --path quota.pending true`)",
             Cloud.AZURE: "AKS node pool", Cloud.GCP: "GKE node pool in a zone"}[s.cloud]
    pools = {"systemPool": s.system_pool, "gpuPools.onDemand": s.gpu_pools.on_demand,
             "gpuPools.spot": s.gpu_pools.spot}
    for path, pool in pools.items():
        if pool.max_nodes > most:
            yield Problem(f"{path}.maxNodes", pool.max_nodes,
                          f"at most {most} nodes per {where}: "
                          f"`{set_command(f'{path}.maxNodes', min(pool.max_nodes, most))}`")


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
                          f"`{rm_command(f'tags.{sorted(keys)[-1]}')}`")


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
            f"{shlex.quote(image)}` prints it; then `pulumi config set --path job.image "
            f"{shlex.quote(image.split('@')[0])}@sha256:<digest>`")


SECURITY_RULES = (api_access_is_not_most_of_the_internet, job_namespace_is_its_own,
                  job_service_account_is_its_own, mount_path_is_not_the_runtime_s,
                  checkpoints_keep_is_bounded, dataset_path_is_a_folder, tags_fit_the_cloud,
                  aws_tags_fit_beside_the_stack_s_own, gcp_labels_do_not_collide,
                  job_image_is_an_image_reference, job_namespace_is_not_the_cloud_s,
                  api_access_cidrs_fit_the_control_plane,
                  azure_and_gcp_tags_fit_beside_the_stack_s_own, tags_are_not_the_stack_s_own,
                  pools_fit_the_cloud_s_node_limit)
