"""Cluster add-ons on the GPU nodes: the NVIDIA GPU Operator and, for InfiniBand, the NVIDIA
Network Operator with its RDMA shared device plugin (Azure's AKS RDMA/InfiniBand guidance).

Versions come from infra/addon_versions.py for the cluster's Kubernetes minor; the Network
Operator and its NicClusterPolicy image tags go together (NVIDIA's Network Operator platform
support table), so NIC_POLICY_IMAGES holds the tags of each operator version the table lists.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from infra import dcgm
from infra.addon_versions import version_for
from infra.azure.interconnect import RDMA_HCA_MAX, RDMA_RESOURCE_NAME, RDMA_RESOURCE_PREFIX
from infra.contract import Taint

NVIDIA_HELM_REPO = "https://helm.ngc.nvidia.com/nvidia"
GPU_OPERATOR_CHART = "gpu-operator"  # = its add-on name in infra/addon_versions.py
NETWORK_OPERATOR_CHART = "network-operator"


@dataclass(frozen=True)
class NicPolicyImages:
    doca_driver: str  # nvcr.io/nvidia/mellanox/doca-driver tag
    rdma_plugin: str  # nvcr.io/nvidia/mellanox/k8s-rdma-shared-dev-plugin tag


# Per Network Operator version (its release notes' component table).
NIC_POLICY_IMAGES: dict[str, NicPolicyImages] = {
    "25.10.0": NicPolicyImages(doca_driver="doca3.2.0-25.10-1.2.8.0-2",
                               rdma_plugin="network-operator-v25.10.0"),
    # Mellanox/network-operator hack/release.yaml @ v26.4.0 (Mofed, RdmaSharedDevicePlugin).
    "26.4.0": NicPolicyImages(doca_driver="doca3.4.0-26.04-0.8.6.0-0",
                              rdma_plugin="network-operator-v26.4.0"),
}
MELLANOX_VENDOR_ID = "15b3"  # PCI vendor of the ConnectX InfiniBand HCAs


def tolerations(taints: Sequence[Taint]) -> list[dict[str, str]]:
    """Tolerations for the GPU pools' taints, so node agents (driver, device plugins) run there."""
    unique = {(t.key, t.value, t.effect) for t in taints}
    return [{"key": k, "operator": "Equal", "value": v, "effect": e} for k, v, e in sorted(unique)]


def gpu_operator_values(rdma: bool, taints: Sequence[Taint]) -> dict:
    """Driver, container toolkit and device plugin from the operator (AKS driver install is
    skipped on the pools); with InfiniBand, the driver loads nvidia-peermem for GPUDirect RDMA
    and NFD comes from the Network Operator instead."""
    gpu_tolerations = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                       *tolerations(taints)]
    return {
        "nfd": {"enabled": not rdma},
        # The operator's own NFD workers tolerate only control-plane and nvidia.com/gpu taints
        # (gpu-operator v25.10.0 deployments/gpu-operator/values.yaml): without these they never
        # label a GPU node, and the driver and device plugin are never deployed there.
        "node-feature-discovery": {"worker": {"tolerations": gpu_tolerations}},
        "driver": {"enabled": True, "rdma": {"enabled": rdma, "useHostMofed": False}},
        "daemonsets": {"tolerations": gpu_tolerations},
        # GPU metrics, as GKE has them managed: the operator's own dcgm-exporter (on by default;
        # said here because `status` reads it, infra/dcgm.py EXPORTERS). No ServiceMonitor:
        # there is no Prometheus Operator CRD on this cluster.
        "dcgmExporter": {"enabled": True, "serviceMonitor": {"enabled": False}},
        "migManager": {"enabled": False},
        "vgpuDeviceManager": {"enabled": False},
        "vfioManager": {"enabled": False},
        "sandboxDevicePlugin": {"enabled": False},
        "kataSandboxDevicePlugin": {"enabled": False},  # v26.3+; deployed only for Kata anyway
    }


def network_operator_values(taints: Sequence[Taint]) -> dict:
    """NFD labels the Mellanox nodes; its workers stay off the system pool and tolerate GPUs."""
    return {
        "node-feature-discovery": {
            "worker": {
                "tolerations": tolerations(taints),
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{
                        "key": "kubernetes.azure.com/mode", "operator": "NotIn",
                        "values": ["system"]}]}]}}},
            },
        },
    }


def nic_cluster_policy_spec(taints: Sequence[Taint], images: NicPolicyImages) -> dict:
    """OFED driver plus the RDMA shared device plugin on nodes with a Mellanox NIC."""
    # resourcePrefix/resourceName make the pods' resource rdma/ib (Mellanox/k8s-rdma-shared-dev-plugin
    # README, "Configuration"): no "_", so the GPU pools can declare it for the autoscaler.
    plugin_config = {"configList": [{
        "resourcePrefix": RDMA_RESOURCE_PREFIX,
        "resourceName": RDMA_RESOURCE_NAME,
        "rdmaHcaMax": RDMA_HCA_MAX,
        "selectors": {"vendors": [MELLANOX_VENDOR_ID], "linkTypes": ["infiniband"]},
    }]}
    return {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": f"feature.node.kubernetes.io/pci-{MELLANOX_VENDOR_ID}"
                                          ".present", "operator": "In", "values": ["true"]}]}]}},
        "tolerations": tolerations(taints),
        "ofedDriver": {
            "repository": "nvcr.io/nvidia/mellanox",
            "image": "doca-driver",
            "version": images.doca_driver,
            # Azure's own NicClusterPolicy for this driver tag (Azure/aks-rdma-infiniband
            # configs/nicclusterpolicy/base/nic.yaml, PR #55): works around
            # Mellanox/doca-driver-build#52 (`openibd restart` failing on NDm A100 v4).
            "env": [{"name": "OFED_BLACKLIST_MODULES_FILE",
                     "value": "/host/etc/modprobe.d/blacklist-ofed-modules.conf"}],
            "upgradePolicy": {"autoUpgrade": True, "maxParallelUpgrades": 1,
                              "drain": {"enable": True, "force": True, "deleteEmptyDir": True,
                                        "timeoutSeconds": 300}},
        },
        "rdmaSharedDevicePlugin": {
            "repository": "nvcr.io/nvidia/mellanox",
            "image": "k8s-rdma-shared-dev-plugin",
            "version": images.rdma_plugin,
            "config": json.dumps(plugin_config),
        },
    }


def _privileged_namespace(prefix: str, name: str, opts: pulumi.ResourceOptions
                          ) -> k8s.core.v1.Namespace:
    """Driver containers load kernel modules: their namespace must allow privileged pods."""
    return k8s.core.v1.Namespace(
        f"{prefix}-{name}-namespace",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=name, labels={"pod-security.kubernetes.io/enforce": "privileged"}),
        opts=opts,
    )


def create_addons(prefix: str, rdma: bool, taints: Sequence[Taint], kubernetes_version: str,
                  opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """Install the operators at the versions for the cluster's minor; returns what the job
    must wait for."""
    ready: list[pulumi.Resource] = []
    network_ready: list[pulumi.Resource] = []
    if rdma:
        network_version = version_for(NETWORK_OPERATOR_CHART, kubernetes_version)
        namespace = _privileged_namespace(prefix, "network-operator", opts)
        network_operator = k8s.helm.v3.Release(
            f"{prefix}-network-operator",
            name="network-operator",
            chart=NETWORK_OPERATOR_CHART,
            version=network_version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=NVIDIA_HELM_REPO),
            namespace=namespace.metadata.name,
            values=network_operator_values(taints),
            timeout=1800,  # seconds: driver containers compile against the node kernel
            opts=opts,
        )
        policy = k8s.apiextensions.CustomResource(
            f"{prefix}-nic-cluster-policy",
            api_version="mellanox.com/v1alpha1",
            kind="NicClusterPolicy",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="nic-cluster-policy"),
            spec=nic_cluster_policy_spec(taints, NIC_POLICY_IMAGES[network_version]),
            opts=pulumi.ResourceOptions.merge(
                opts, pulumi.ResourceOptions(depends_on=[network_operator])),
        )
        network_ready = [network_operator, policy]
        ready += network_ready
    gpu_namespace = _privileged_namespace(prefix, dcgm.GPU_OPERATOR_NAMESPACE, opts)
    gpu_operator = k8s.helm.v3.Release(
        f"{prefix}-gpu-operator",
        name="gpu-operator",
        chart=GPU_OPERATOR_CHART,
        version=version_for(GPU_OPERATOR_CHART, kubernetes_version),
        repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=NVIDIA_HELM_REPO),
        namespace=gpu_namespace.metadata.name,
        values=gpu_operator_values(rdma, taints),
        timeout=1800,
        # With RDMA the GPU driver needs the OFED modules first (nvidia-peermem).
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=network_ready)),
    )
    ready.append(gpu_operator)
    return ready
