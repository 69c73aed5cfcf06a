"""EKS managed add-ons and the Helm charts GPU training needs (device plugins, FSx CSI driver).

EKS add-on versions are left to EKS: it picks the default build for the cluster's Kubernetes
version, which a fixed pin would break on every version bump. Helm charts are pinned below.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from infra.contract import Taint

# Pinned Helm charts. Sources: NVIDIA's chart repo https://nvidia.github.io/k8s-device-plugin
# (0.17.1 is the version the AWS EKS Blueprints GPU patterns install on AL2023 NVIDIA nodes);
# https://aws.github.io/eks-charts aws-efa-k8s-device-plugin v0.5.7 (same Blueprints patterns);
# https://kubernetes-sigs.github.io/aws-fsx-csi-driver chart 1.11.0 (driver v1.3.0, CHANGELOG in
# kubernetes-sigs/aws-fsx-csi-driver charts/). Bump with `helm search repo <chart> --versions`.
NVIDIA_DEVICE_PLUGIN = ("nvidia-device-plugin", "0.17.1", "https://nvidia.github.io/k8s-device-plugin")
EFA_DEVICE_PLUGIN = ("aws-efa-k8s-device-plugin", "v0.5.7", "https://aws.github.io/eks-charts")
FSX_CSI_DRIVER = ("aws-fsx-csi-driver", "1.11.0", "https://kubernetes-sigs.github.io/aws-fsx-csi-driver")
FSX_CONTROLLER_SERVICE_ACCOUNT = "fsx-csi-controller-sa"  # the chart's default name
SYSTEM_NAMESPACE = "kube-system"

# Needed before nodes can become Ready (networking, pod identity): created before node groups.
BEFORE_NODES = ("vpc-cni", "kube-proxy", "eks-pod-identity-agent")
# Needs running nodes to become ACTIVE: created after the node groups.
AFTER_NODES = ("coredns",)


@dataclass(frozen=True)
class Chart:
    name: str
    version: str
    repo: str


def managed_addon(prefix: str, cluster_name: pulumi.Input[str], addon: str,
                  opts: pulumi.ResourceOptions, role_arn: pulumi.Input[str] | None = None
                  ) -> aws.eks.Addon:
    return aws.eks.Addon(
        f"{prefix}-{addon}", cluster_name=cluster_name, addon_name=addon,
        service_account_role_arn=role_arn,
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


def helm_release(prefix: str, chart: tuple[str, str, str], values: dict,
                 opts: pulumi.ResourceOptions) -> k8s.helm.v3.Release:
    name, version, repo = chart
    return k8s.helm.v3.Release(
        f"{prefix}-{name}",
        k8s.helm.v3.ReleaseArgs(
            name=name, chart=name, version=version, namespace=SYSTEM_NAMESPACE,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=repo), values=values,
            atomic=True, cleanup_on_fail=True),
        opts=opts)


def nvidia_device_plugin_values(gpu_label: str, taints: list[Taint]) -> dict:
    return {"affinity": gpu_node_affinity(gpu_label), "tolerations": tolerations(taints)}


def efa_device_plugin_values(gpu_label: str, taints: list[Taint]) -> dict:
    return {"nodeSelector": {gpu_label: "true"}, "tolerations": tolerations(taints)}


def fsx_csi_values(role_arn: pulumi.Input[str], taints: list[Taint]) -> dict:
    return {
        "controller": {
            "serviceAccount": {"create": True, "name": FSX_CONTROLLER_SERVICE_ACCOUNT,
                               "annotations": {"eks.amazonaws.com/role-arn": role_arn}},
        },
        "node": {"tolerateAllTaints": False, "tolerations": tolerations(taints)},
    }
