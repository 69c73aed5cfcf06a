"""Which version of each cluster add-on the program installs, per Kubernetes minor: one table,
one row per installable version, each with the Kubernetes minors its project documents and
where that is written.

Why a table: a cluster now gets whatever minor its cloud offers on the day of the first
`pulumi up` (infra/kubernetes_release.py), so an add-on pinned once and never checked against
that minor drifts out of its supported range without anyone noticing (JobSet v0.10.1, for
Kubernetes 1.32-1.34, ran on 1.35+ clusters). Here every install site asks `version_for` with
the chosen minor (`settings.kubernetes.version`), and `make check-tables` (infra/table_age.py)
says when this table was last read against its sources.

Policy for a minor outside the table:
- newer than the newest supported one: the newest version, with a pulumi.log.warn naming the
  add-on, the version and its verified range. A stack never becomes undeployable just because
  the table aged; the warning says what to recheck.
- older than the oldest supported one: a SettingsError on `kubernetes.version`, raised by
  `check_minor` in __main__.py before any resource is registered.

How to read a row's range: `oldest`..`newest` are the minors the source documents. Where a
project publishes only a minimum (device plugins, CSI driver, node termination handler, the
GKE GPUDirect installers), `newest` is the newest Kubernetes minor released when the row was
checked (NEWEST_RELEASED_MINOR): nothing newer was known to work, so a newer one warns.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import pulumi

from infra.catalog.cloud import Cloud
from infra.kubernetes_release import minor_key
from infra.settings.errors import Problem, SettingsError

# The day every row below was last read against its source. `make check-tables` warns once it
# is more than six months old.
CHECKED_ON = date(2026, 11, 26)
# Kubernetes v1.37 is the newest minor released on CHECKED_ON (AKS lists it GA from October
# 2026: infra/kubernetes_versions.py AKS_KUBERNETES_VERSIONS).
NEWEST_RELEASED_MINOR = "1.37"
SETTING = "kubernetes.version"


@dataclass(frozen=True)
class AddonVersion:
    """One installable version of an add-on and the Kubernetes minors it supports."""

    version: str  # what the install site passes on: chart version, image tag, release tag
    oldest: str  # oldest supported Kubernetes minor
    newest: str  # newest supported (or, for minimum-only sources, newest checked) minor
    source: str  # where the range is written
    # False: the range was not read from its source in the last pass (`make check-tables` lists
    # these rows until someone does).
    verified: bool = True

    def supports(self, minor: str) -> bool:
        return minor_key(self.oldest) <= minor_key(minor) <= minor_key(self.newest)

    @property
    def range(self) -> str:
        return f"Kubernetes {self.oldest}-{self.newest}"


def _autoscaler(minor: str, tag: str) -> AddonVersion:
    """Cluster Autoscaler images go with one minor each: "We recommend using Cluster Autoscaler
    with the Kubernetes control plane version for which it was meant" (README "Releases")."""
    return AddonVersion(
        tag, minor, minor,
        "https://github.com/kubernetes/autoscaler/releases/tag/"
        f"cluster-autoscaler-{tag.lstrip('v')} (cluster-autoscaler/README.md, 'Releases')")


_K8S_API = "JobSet supports 'the last 3 Kubernetes minor versions' (README 'Production Readiness " \
           "status', installation guide 'Before you begin') counted back from the k8s.io/api " \
           "minor in its go.mod"
_DEVICE_PLUGIN_API = "no upper bound published; kubelet device plugin API v1beta1, GA since 1.10"

ADDON_VERSIONS: dict[str, tuple[AddonVersion, ...]] = {
    # --- every cloud: the training job's controller ------------------------------------------
    "jobset": (
        AddonVersion("v0.10.1", "1.32", "1.34",
                     "https://github.com/kubernetes-sigs/jobset/releases/tag/v0.10.1 (go.mod "
                     f"k8s.io/api v0.34.1; {_K8S_API})"),
        AddonVersion("v0.11.1", "1.33", "1.35",
                     "https://github.com/kubernetes-sigs/jobset/releases/tag/v0.11.1 (go.mod "
                     f"k8s.io/api v0.35.0; {_K8S_API})"),
        AddonVersion("v0.12.0", "1.34", "1.36",
                     "https://github.com/kubernetes-sigs/jobset/releases/tag/v0.12.0 (go.mod "
                     f"k8s.io/api v0.36.0; {_K8S_API})"),
    ),
    "kueue": (
        # Gang admission for the JobSet (workloads/kueue.py); the Helm chart's version is this
        # tag without the v. Kueue publishes a minimum only.
        AddonVersion("v0.19.2", "1.29", NEWEST_RELEASED_MINOR,
                     "https://github.com/kubernetes-sigs/kueue/blob/v0.19.2/site/content/en/docs/"
                     "getting-started/installation.md ('A Kubernetes cluster with version 1.29 "
                     "or newer'; go.mod k8s.io/api v0.36.2; no upper bound published)"),
    ),
    "training-operator": (
        # The manifests are vendored (workloads/manifests/training-operator-<version>.yaml).
        AddonVersion("v1.9.4", "1.27", NEWEST_RELEASED_MINOR,
                     "https://github.com/kubeflow/trainer/releases/tag/v1.9.4 (the v1 line; "
                     "range not read in the 2026-11 pass: 1.27 is a placeholder minimum)",
                     verified=False),
    ),
    # --- AWS ------------------------------------------------------------------------------
    # The image tag; the chart (infra/aws/autoscaler.py CHART) takes any tag.
    "cluster-autoscaler": tuple(_autoscaler(minor, tag) for minor, tag in (
        ("1.30", "v1.30.7"), ("1.31", "v1.31.5"), ("1.32", "v1.32.7"), ("1.33", "v1.33.6"),
        ("1.34", "v1.34.5"), ("1.35", "v1.35.2"), ("1.36", "v1.36.1"),
    )),
    "aws-node-termination-handler": (
        AddonVersion("0.27.6", "1.16", NEWEST_RELEASED_MINOR,
                     "https://github.com/aws/aws-node-termination-handler/blob/v1.25.6/config/"
                     "helm/aws-node-termination-handler/README.md (chart 0.27.6 = app v1.25.6; "
                     "'Prerequisites: Kubernetes >= 1.16', no upper bound)"),
    ),
    "nvidia-device-plugin": (
        AddonVersion("0.17.1", "1.10", NEWEST_RELEASED_MINOR,
                     "https://github.com/NVIDIA/k8s-device-plugin/blob/v0.17.1/README.md "
                     f"('Prerequisites: Kubernetes version >= 1.10'; {_DEVICE_PLUGIN_API})"),
    ),
    "dcgm-exporter": (
        # The Helm chart's version; its image is the chart's own image.tag, 4.5.3-4.8.2-distroless
        # (DCGM 4.5.3; DCGM supports "All NVIDIA Kepler (K80) and newer NVIDIA datacenter GPUs",
        # https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/getting-started.html, so the
        # catalog's A100, H100 and H200, and Amazon Linux 2023 among its distributions).
        AddonVersion("4.8.2", "1.19", NEWEST_RELEASED_MINOR,
                     "https://github.com/NVIDIA/dcgm-exporter/blob/4.5.3-4.8.2/deployment/"
                     "Chart.yaml (kubeVersion '>= 1.19.0-0', no upper bound; the newest chart in "
                     "https://nvidia.github.io/dcgm-exporter/helm-charts/index.yaml, 2026-05-06)"),
    ),
    "aws-efa-k8s-device-plugin": (
        AddonVersion("v0.5.30", "1.10", NEWEST_RELEASED_MINOR,
                     "https://github.com/aws/eks-charts/tree/master/stable/"
                     f"aws-efa-k8s-device-plugin ({_DEVICE_PLUGIN_API})"),
    ),
    "aws-fsx-csi-driver": (
        AddonVersion("1.17.0", "1.17", NEWEST_RELEASED_MINOR,
                     "https://github.com/kubernetes-sigs/aws-fsx-csi-driver/blob/master/docs/"
                     "README.md 'Kubernetes Version Compatibility Matrix' (chart 1.17.0 = "
                     "driver 1.9.0: 'v1.17+', no upper bound)"),
    ),
    # --- Azure -------------------------------------------------------------------------------
    "gpu-operator": (
        AddonVersion("v25.10.0", "1.30", "1.35",
                     "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/25.10.0/"
                     "platform-support.html (NVIDIA/cloud-native-docs gpu-operator/"
                     "platform-support.rst @ adfe9224^: Ubuntu 22.04/24.04, Kubernetes "
                     "1.30---1.35)"),
        # The version Azure's AKS RDMA/InfiniBand guide installs. Its chart's values keep every
        # key infra/azure/addons.py sets (deployments/gpu-operator/values.yaml @ v26.3.3, read
        # 2026-11-28; new: kataSandboxDevicePlugin, deployed only with sandboxWorkloads).
        AddonVersion("v26.3.3", "1.32", "1.36",
                     "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/26.3.3/"
                     "platform-support.html (NVIDIA/cloud-native-docs gpu-operator/"
                     "platform-support.rst @ 815c4afb 'Update docs for 26.3.3': Ubuntu 22.04 "
                     "and 24.04, Kubernetes 1.32---1.36)"),
    ),
    "network-operator": (
        # Bumped together with the NicClusterPolicy images (infra/azure/addons.py).
        AddonVersion("25.10.0", "1.30", "1.35",
                     "https://docs.nvidia.com/networking/display/kubernetes2510/platform-support"
                     " (not read in the 2026-11 pass: the GPU Operator 25.10 range, the same "
                     "NVIDIA cloud-native release train, stands in for it)", verified=False),
        # The version Azure's AKS RDMA/InfiniBand guide installs; NicClusterPolicy image tags
        # from Mellanox/network-operator hack/release.yaml @ v26.4.0 (infra/azure/addons.py).
        AddonVersion("26.4.0", "1.32", "1.36",
                     "https://docs.nvidia.com/networking/display/kubernetes2640/platform-support"
                     " (its Kubernetes row not readable from here on 2026-11-28; 26.1.x lists "
                     "1.31-1.35 (Mellanox/network-operator-docs docs/platform-support.rst @ "
                     "0c0ecad), and the GPU Operator 26.3.3 range of the same release train, "
                     "1.32-1.36, stands in for it; chart kubeVersion '>= 1.21.0-0')",
                     verified=False),
    ),
    # --- GCP: NCCL plugin installer images (tag) ---------------------------------------------
    "gpudirect-tcpx": (
        AddonVersion("v3.1.12", "1.27", NEWEST_RELEASED_MINOR,
                     "https://cloud.google.com/kubernetes-engine/docs/how-to/gpu-bandwidth-"
                     "gpudirect-tcpx (a minimum GKE version only, 1.27 as remembered, not "
                     "reread in the 2026-11 pass); tag from container-engine-accelerators "
                     "gpudirect-tcpx/README.md, release Jun 22, 2026 (rxdm v2.0.15, NCCL "
                     "2.19.4)", verified=False),
    ),
    "gpudirect-tcpxo": (
        AddonVersion("v1.0.15", "1.28", NEWEST_RELEASED_MINOR,
                     "https://cloud.google.com/kubernetes-engine/docs/how-to/gpu-bandwidth-"
                     "gpudirect-tcpxo (a minimum GKE version only, 1.28 as remembered, not "
                     "reread in the 2026-11 pass); tag from container-engine-accelerators "
                     "gpudirect-tcpxo/README.md", verified=False),
    ),
}

# What each cloud's stack may install (its own add-ons and both job kinds' controllers).
WORKLOAD_ADDONS = ("jobset", "kueue", "training-operator")
CLOUD_ADDONS: dict[Cloud, tuple[str, ...]] = {
    Cloud.AWS: ("cluster-autoscaler", "aws-node-termination-handler", "nvidia-device-plugin",
                "aws-efa-k8s-device-plugin", "aws-fsx-csi-driver", "dcgm-exporter",
                *WORKLOAD_ADDONS),
    Cloud.AZURE: ("gpu-operator", "network-operator", *WORKLOAD_ADDONS),
    Cloud.GCP: ("gpudirect-tcpx", "gpudirect-tcpxo", *WORKLOAD_ADDONS),
}


@dataclass(frozen=True)
class Choice:
    """What `choose` picked: the row, and whether the minor is past every row's range."""

    addon: str
    row: AddonVersion
    beyond_table: bool

    @property
    def warning(self) -> str | None:
        if not self.beyond_table:
            return None
        return (f"{self.addon} {self.row.version} is verified for {self.row.range} only; "
                f"installing it anyway (the newest in infra/addon_versions.py, last checked "
                f"{CHECKED_ON.isoformat()}). Recheck its release notes and add a row.")


def _rows(addon: str) -> tuple[AddonVersion, ...]:
    rows = ADDON_VERSIONS.get(addon)
    if not rows:
        raise KeyError(f"no add-on {addon!r} in infra/addon_versions.py ADDON_VERSIONS")
    return rows


def too_old(addon: str, minor: str) -> Problem | None:
    """The problem when `minor` is older than every version of `addon` supports."""
    oldest = min(_rows(addon), key=lambda row: minor_key(row.oldest))
    if minor_key(minor) >= minor_key(oldest.oldest):
        return None
    return Problem(SETTING, minor,
                   f"{addon} supports Kubernetes {oldest.oldest} and later (oldest version in "
                   f"the table: {oldest.version}, {oldest.range}); choose {oldest.oldest} or newer")


def choose(addon: str, minor: str) -> Choice:
    """The newest version of `addon` that supports `minor`; past the table, the newest one."""
    problem = too_old(addon, minor)
    if problem is not None:
        raise SettingsError([problem])
    rows = _rows(addon)
    fitting = [row for row in rows if row.supports(minor)]
    if fitting:
        return Choice(addon, max(fitting, key=lambda row: minor_key(row.newest)), False)
    newest = max(rows, key=lambda row: minor_key(row.newest))
    if minor_key(minor) > minor_key(newest.newest):
        return Choice(addon, newest, True)
    # A gap between rows inside the table's span: the table is wrong, not the stack.
    raise ValueError(f"infra/addon_versions.py: no {addon} row covers Kubernetes {minor}, "
                     f"which lies inside its table's span")


def version_for(addon: str, minor: str) -> str:
    """What an install site installs for the cluster's minor; warns past the table."""
    chosen = choose(addon, minor)
    if chosen.warning:
        pulumi.log.warn(chosen.warning)
    return chosen.row.version


def check_minor(cloud: Cloud, minor: str) -> None:
    """Refuse, before any resource, a minor older than any add-on this cloud may install
    supports. Called from __main__.py once the minor is chosen."""
    problems = [p for addon in CLOUD_ADDONS[cloud] if (p := too_old(addon, minor))]
    if problems:
        raise SettingsError(problems)
