"""How long a node takes to join, and how long an idle one is kept: per cloud, estimates with
their sources. A machine's own join time is machines.py's node_ready_minutes."""

from __future__ import annotations

from infra.catalog.cloud import Cloud

# --- Node join time: from the autoscaler's scale-up to a Ready trainer pod on the new node ----
# ESTIMATES, not measured here and published by no vendor as a bound: each sums the VM's start
# and node registration (minutes), the GPU stack a node gets after it joins, and the pull of a
# multi-GB trainer image onto an empty disk. Kueue's PodsReady timeout is this figure
# (workloads/kueue.py), so a slow but healthy cold start is never evicted as "no capacity".
# - AWS: the EKS accelerated AMI ships the NVIDIA driver; the EFA and GPU device plugins start
#   after registration. p4d/p5 with 4-32 EFA interfaces and 8 GPUs: 30 minutes.
# - GCP: GKE's driver installer DaemonSet, then on A3 the GPUDirect sidecar image (rxdm) and
#   NCCL plugin installer. 30 minutes.
# - Azure: AKS's own driver install is skipped on the GPU pools and the GPU Operator's driver
#   container compiles the driver on each new node (infra/azure/addons.py); with InfiniBand the
#   Network Operator's DOCA-OFED driver container builds and loads its modules first (the driver
#   container "builds the DOCA OFED driver from source code dynamically", Mellanox/
#   network-operator-docs docs/openshift/disconnected-openshift.rst), 15 minutes more; the
#   operators' own Helm timeout here is 1800 s for the same reason.
NODE_READY_MINUTES = {Cloud.AWS: 30, Cloud.GCP: 30, Cloud.AZURE: 30}
OFED_BUILD_MINUTES = 15  # Azure InfiniBand: the DOCA-OFED driver built on the node first


# --- Scale-down tail: how long an idle GPU node is kept after the job ends --------------------
# The cluster autoscaler's scale-down-unneeded-time on each cloud, the one source for both the
# AWS chart value (infra/aws/autoscaler.py) and the run estimate's idle tail (infra/estimate.py).
# - AWS: set by the stack on its Cluster Autoscaler chart (the upstream default, stated).
# - Azure: the stack sets no autoScalerProfile (infra/azure/cluster.py), so AKS's default:
#   "How long a node should be unneeded before it is eligible for scale down. The default is
#   '10m'" (ManagedClusterAutoScalerProfile.ScaleDownUnneededTime, learn.microsoft.com).
# - GCP: the stack sets no autoscaling profile (balanced, the default); GKE does not publish the
#   figure: 10 minutes is the open-source autoscaler's default (kubernetes/autoscaler FAQ,
#   --scale-down-unneeded-time), an ESTIMATE.
SCALE_DOWN_UNNEEDED_MINUTES = {Cloud.AWS: 10, Cloud.AZURE: 10, Cloud.GCP: 10}
