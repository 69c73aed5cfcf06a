"""EKS managed add-ons and the Helm charts GPU training needs (device plugins, FSx CSI driver).

EKS managed add-ons (vpc-cni, kube-proxy, CoreDNS) name their version: EKS's default build for
the cluster's Kubernetes minor, asked of EKS on every run (`addon_version`). Without a version
EKS installs that default once and never moves it, so after a control-plane upgrade the add-ons
would lag the minor, and EKS upgrade insights flag add-ons incompatible with the next minor
(https://docs.aws.amazon.com/eks/latest/userguide/cluster-insights.html). Helm charts: names and
repositories here, versions from infra/addon_versions.py for the cluster's Kubernetes minor.
"""

from __future__ import annotations

import hashlib
import json

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from infra import dcgm
from infra.addon_versions import version_for
from infra.catalog.machines import MACHINES, Interconnect
from infra.contract import Taint

# Helm charts, each read in its repository at the version infra/addon_versions.py lists:
# - nvidia-device-plugin 0.17.1: NVIDIA/k8s-device-plugin tag v0.17.1,
#   deployments/helm/nvidia-device-plugin (values `affinity`, `tolerations`).
# - aws-efa-k8s-device-plugin v0.5.30 (image v0.5.20): aws/eks-charts @ 5239609,
#   stable/aws-efa-k8s-device-plugin (values `nodeSelector`, `tolerations`,
#   `supportedInstanceLabels.keys`/`.values`: templates/daemonset.yaml's required node affinity
#   admits only the instance types listed there, so the stack lists the catalog's EFA machines
#   itself instead of trusting the pinned chart's list to know a new one).
# - aws-fsx-csi-driver 1.17.0 (driver 1.9.0): kubernetes-sigs/aws-fsx-csi-driver tag
#   helm-chart-aws-fsx-csi-driver-1.17.0, charts/aws-fsx-csi-driver (values
#   `controller.region`, `controller.serviceAccount`, `node.tolerateAllTaints`, `node.tolerations`).
# - dcgm-exporter 4.8.2 (image nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless, the
#   chart's own image.tag): NVIDIA/dcgm-exporter tag 4.5.3-4.8.2, deployment/ (values
#   `customMetrics`, `securityContext`, `serviceMonitor.enabled`, `nodeSelector`, `tolerations`,
#   `resources`, `priorityClassName`); tests/schemas/dcgm-exporter-4.8.2.json holds its values.
# Bump with `helm search repo <chart> --versions`, reread the values, add a table row.
# (chart name = add-on name in infra/addon_versions.py, repository)
NVIDIA_DEVICE_PLUGIN = ("nvidia-device-plugin", "https://nvidia.github.io/k8s-device-plugin")
DCGM_EXPORTER = ("dcgm-exporter", "https://nvidia.github.io/dcgm-exporter/helm-charts")
EFA_DEVICE_PLUGIN = ("aws-efa-k8s-device-plugin", "https://aws.github.io/eks-charts")
FSX_CSI_DRIVER = ("aws-fsx-csi-driver", "https://kubernetes-sigs.github.io/aws-fsx-csi-driver")
SYSTEM_NAMESPACE = "kube-system"

# Needed before nodes can become Ready (pod networking): created before node groups. No Pod
# Identity agent: every pod role here is IRSA, which needs no agent.
BEFORE_NODES = ("vpc-cni", "kube-proxy")
# Needs running nodes to become ACTIVE: created after the node groups.
AFTER_NODES = ("coredns",)


# The VPC CNI's network policy agent is off by default, which leaves every NetworkPolicy
# (workloads/network_policy.py) unenforced; this turns it on (EKS User Guide, "Restrict Pod
# network traffic with Kubernetes network policies": configuration value
# {"enableNetworkPolicy": "true"}, a string, for the Amazon VPC CNI add-on).
ADDON_CONFIGURATION: dict[str, dict[str, str]] = {"vpc-cni": {"enableNetworkPolicy": "true"}}


def addon_version(addon: str, minor: str, lookup: pulumi.InvokeOutputOptions) -> pulumi.Output[str]:
    """EKS's default version of `addon` for Kubernetes `minor` (DescribeAddonVersions, the
    version whose compatibility for that minor says defaultVersion).

    The default rather than the newest (`most_recent=True`): it is the build EKS itself installs
    when none is named, so a new cluster gets what it got before, and it moves only when AWS
    promotes a build, not on each release, so a later `pulumi up` that changes nothing else
    rarely updates the add-ons. Both follow the minor: an upgrade run asks for the new one."""
    return aws.eks.get_addon_version_output(
        addon_name=addon, kubernetes_version=minor, most_recent=False, opts=lookup).version


def managed_addon(prefix: str, cluster_name: pulumi.Input[str], addon: str, minor: str,
                  lookup: pulumi.InvokeOutputOptions, opts: pulumi.ResourceOptions,
                  role_arn: pulumi.Input[str] | None = None) -> aws.eks.Addon:
    """An EKS managed add-on at EKS's default version for `minor` (the control plane's minor on
    this run). PRESERVE on update keeps settings changed in the cluster."""
    configuration = ADDON_CONFIGURATION.get(addon)
    return aws.eks.Addon(
        f"{prefix}-{addon}", cluster_name=cluster_name, addon_name=addon,
        addon_version=addon_version(addon, minor, lookup),
        service_account_role_arn=role_arn,
        configuration_values=json.dumps(configuration) if configuration else None,
        resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="PRESERVE",
        opts=opts)


def tolerations(taints: list[Taint]) -> list[dict[str, str]]:
    """Tolerate each distinct taint key (GPU, spot) so node agents run on every GPU node."""
    seen: dict[str, Taint] = {t.key: t for t in taints}
    return [{"key": t.key, "operator": "Exists", "effect": t.effect} for t in seen.values()]


def gpu_node_affinity(label: str) -> dict:
    """Replaces the chart's default affinity (NFD labels EKS nodes do not carry) with ours."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": label, "operator": "In", "values": ["true"]}]}]}}}


def chart_for(chart: tuple[str, str], minor: str) -> tuple[str, str, str]:
    """(name, version, repository): the chart's version for the cluster's Kubernetes minor."""
    name, repo = chart
    return name, version_for(name, minor), repo


def helm_release(prefix: str, chart: tuple[str, str, str], values: dict,
                 opts: pulumi.ResourceOptions, *, required: bool = True) -> k8s.helm.v3.Release:
    """A chart in kube-system. `required`: the stack cannot work without it, so `pulumi up`
    waits for its pods and rolls the release back if they fail (atomic). An optional chart
    (required=False, e.g. GPU metrics) is not awaited, so its failing pods cannot fail the
    deploy: pulumi-kubernetes ReleaseArgs `skip_await` ("skip such await logic"), which
    `atomic` would disable ("skipAwait will be disabled automatically if atomic is used")."""
    name, version, repo = chart
    return k8s.helm.v3.Release(
        f"{prefix}-{name}",
        k8s.helm.v3.ReleaseArgs(
            name=name, chart=name, version=version, namespace=SYSTEM_NAMESPACE,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=repo), values=values,
            atomic=required, skip_await=not required, cleanup_on_fail=True),
        opts=opts)


def nvidia_device_plugin_values(gpu_label: str, taints: list[Taint]) -> dict:
    return {"affinity": gpu_node_affinity(gpu_label), "tolerations": tolerations(taints)}


def dcgm_exporter_values(gpu_label: str, taints: list[Taint]) -> dict:
    """GPU metrics on every GPU node (spot included), readable through the API server's pod
    proxy (torchrec_cloud/gpu_metrics.py).

    No capability: the counters leave out the DCGM_FI_PROF_* profiling fields, the only ones
    that need CAP_SYS_ADMIN (infra/dcgm.py COUNTERS). Helm merges maps into the chart's defaults,
    so `add: []` must be said, or the default `add: ["SYS_ADMIN"]` stays. Root (the image's own
    user) without capabilities: the kubelet's pod-resources socket, which maps GPUs to pods, is
    root's; the GPUs themselves come from the NVIDIA runtime the AL2023 NVIDIA AMI makes
    containerd's default (the device plugin relies on it too), through the image's
    NVIDIA_VISIBLE_DEVICES=all. The chart's hostPath for that socket needs the privileged Pod
    Security level, which kube-system has on EKS (no enforce label), as for the device plugin.
    No ServiceMonitor: it needs the Prometheus Operator's CRD, which this cluster does not have,
    and the chart enables one by default.

    The chart mounts the counters' ConfigMap with subPath, which the kubelet never refreshes,
    and nothing in the pod template changes with them: the checksum annotation (the chart's
    `podAnnotations`, templates/daemonset.yaml) makes a new list roll the exporter pods.
    The chart sets the listen address (DCGM_EXPORTER_LISTEN) from `service.address` and the
    container and Service port from `service.port`: both say METRICS_PORT."""
    return {
        "customMetrics": dcgm.COUNTERS,
        "podAnnotations": {
            "checksum/counters": hashlib.sha256(dcgm.COUNTERS.encode()).hexdigest()},
        "securityContext": {
            "runAsNonRoot": False, "runAsUser": 0, "allowPrivilegeEscalation": False,
            "capabilities": {"add": [], "drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "service": {"port": dcgm.METRICS_PORT, "address": f":{dcgm.METRICS_PORT}"},
        "serviceMonitor": {"enabled": False},
        "nodeSelector": {gpu_label: "true"},
        "tolerations": tolerations(taints),
        # The chart's own figures, said here so a chart bump cannot change them unseen; the
        # training pod leaves a tenth of the node to agents like this one (infra/pod_share.py).
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                      "limits": {"cpu": "200m", "memory": "512Mi"}},
        "priorityClassName": "system-node-critical",
    }


INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


def efa_instance_types() -> list[str]:
    """Every EFA machine in infra/catalog/machines.py: the instance types the EFA plugin may run on."""
    return sorted(m.name for m in MACHINES if m.interconnect == Interconnect.EFA)


def efa_device_plugin_values(gpu_label: str, taints: list[Taint]) -> dict:
    """On the GPU nodes only; the chart's instance-type allow-list replaced by the catalog's EFA
    machines (Helm replaces lists whole), so a machine added to the catalog but missing from the
    pinned chart's list still gets its vpc.amazonaws.com/efa devices instead of Pending pods."""
    return {"nodeSelector": {gpu_label: "true"}, "tolerations": tolerations(taints),
            "supportedInstanceLabels": {"keys": [INSTANCE_TYPE_LABEL],
                                        "values": efa_instance_types()}}


FSX_CSI_CONTROLLER_SA = "fsx-csi-controller-sa"  # the chart's controller.serviceAccount.name


def fsx_csi_controller_policy() -> str:
    """Static volumes only (Pulumi creates the file system), so no Create/Delete/Update; but the
    controller polls DescribeFileSystems every minute to cache file system state
    (kubernetes-sigs/aws-fsx-csi-driver @ helm-chart-aws-fsx-csi-driver-1.17.0,
    pkg/cloud/cloud.go: pollFileSystems), which would otherwise fall to the node role and log
    AccessDenied. DescribeFileSystems takes no resource-level restriction."""
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["fsx:DescribeFileSystems"], "Resource": "*"}]})


def fsx_csi_values(region: str, taints: list[Taint], controller_role_arn: pulumi.Input[str]
                   ) -> dict:
    """The controller's own IRSA role (describe only); the region is given so it does not ask
    instance metadata."""
    return {
        "controller": {"region": region, "serviceAccount": {
            "create": True, "name": FSX_CSI_CONTROLLER_SA,
            "annotations": {"eks.amazonaws.com/role-arn": controller_role_arn}}},
        "node": {"tolerateAllTaints": False, "tolerations": tolerations(taints)},
    }
