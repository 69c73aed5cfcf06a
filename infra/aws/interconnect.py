"""What a pod needs to use EFA: the device resource (count from the catalog) and the NCCL and
libfabric environment that forces NCCL onto EFA, so a node without EFA fails the job at NCCL's
first communicator instead of training over TCP sockets.

Sources, pinned to what was read (a value without a source here is a bug):
- aws-ofi-nccl (github.com/aws/aws-ofi-nccl @ 2daf7d30, 2026-08-21): the plugin registers its
  network as "Libfabric" since 1.12 (src/nccl_ofi_interface_nvidia.cpp, ncclNetPlugin_v6..v12
  `.name`; "AWS Libfabric" only for 1.11 and older, or when NCCL_NET asks for that old name);
  the tuner lives inside the net plugin and is also built as libnccl-tuner-ofi.so
  (src/Makefile.am); the EFA env cheat sheet is doc/efa-env-var.md.
- The image (trainer/Dockerfile): EFA installer 1.51.0 = aws-ofi-nccl 1.22.0, libfabric 2.7.0,
  NCCL 2.29.7; the plugin's `libnccl-net.so` copy is deleted, so NCCL loads the plugin only when
  NCCL_NET_PLUGIN=ofi (libnccl-net-ofi.so, in the loader cache).
- awsome-distributed-training (github.com/aws-samples/awsome-distributed-training @ 7217859f,
  2026-02-21): micro-benchmarks/nccl-tests/kubernetes/nccl-tests.yaml (the EKS p5.48xlarge
  manifest) sets FI_PROVIDER=efa, FI_EFA_FORK_SAFE=1, NCCL_TUNER_PLUGIN and requests
  `hugepages-2Mi: 5120Mi`; 3.test_cases/pytorch/FSDP/kubernetes/training_kubernetes.template
  sets NCCL_SOCKET_IFNAME=^lo and FI_EFA_USE_DEVICE_RDMA=1 ("for P5 FI_* should be
  uncommented"); 1.architectures/3.aws-batch/aws-batch-distributed-training-p6.yaml passes
  NCCL_NET_PLUGIN=ofi with FI_PROVIDER=efa, FI_EFA_USE_DEVICE_RDMA=1, FI_EFA_FORK_SAFE=1.
- NCCL: NCCL_NET names the one network NCCL may use, so it fails instead of falling back to its
  internal IB or Socket transport (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-net).
"""

from __future__ import annotations

from infra.catalog.machines import Interconnect, Machine
from infra.contract import InterconnectSpec

EFA_RESOURCE = "vpc.amazonaws.com/efa"
GPU_RESOURCE = "nvidia.com/gpu"
# The network aws-ofi-nccl >= 1.12 registers (1.22.0 in the image). NCCL_NET must equal it.
OFI_NETWORK = "Libfabric"
OFI_PLUGIN = "ofi"  # NCCL loads libnccl-net-<this>.so / libnccl-tuner-<this>.so
# Huge pages for libfabric's EFA bounce buffers. The EKS user guide ("Run machine learning
# training on Amazon EKS with Elastic Fabric Adapter", awsdocs/amazon-eks-user-guide
# latest/ug/ml/node-efa.adoc @ 0743cb1a): EC2 instances with the EFA driver installed
# pre-allocate 2 MiB huge pages "which you can request as resources"; the EKS accelerated AL2023
# AMI installs it with efa-config (awslabs/amazon-eks-ami templates/al2023/provisioners/
# install-efa.sh: `efa_installer.sh --minimal`). How many: efa-config reserves per vCPU, at
# least the 110 MiB per core that awslabs/libfabric-ci-scripts efa-check.sh checks for
# (cores * 110 MiB / 2 MiB + 1 pages); nodes in awsome-distributed-training's EKS READMEs show
# twice that (p5.48xlarge 42242Mi, 3.test_cases/pytorch/mosaicml-composer/stable-diffusion;
# p4de.24xlarge 21122Mi, 3.test_cases/megatron/nemo1.0/EKS). ADT's p5.48xlarge manifests request
# 5120Mi per pod (micro-benchmarks/nccl-tests/kubernetes/nccl-tests.yaml); its p4d/p4de examples
# request none, so there libfabric is told not to use them. Which machines: the catalog's
# Machine.efa_hugepages.
HUGEPAGES_RESOURCE = "hugepages-2Mi"
HUGEPAGES_QUANTITY = "5120Mi"
EFA_HUGEPAGE_MIB_PER_VCPU = 110  # efa-check.sh's floor for efa-config's reservation


def uses_efa(machine: Machine, fabric: bool) -> bool:
    return fabric and machine.interconnect == Interconnect.EFA and machine.efa_interfaces > 0


def hugepages(machine: Machine) -> dict[str, str]:
    """The huge pages the reference manifests request for this machine's pods ({} if none).
    A container that asks for none gets a hugetlb limit of 0: libfabric must then not use them.
    With huge pages in use, a fork() after EFA is up can fail with "Cannot allocate memory"
    (aws-ofi-nccl doc/efa-env-var.md): the trainer forks nothing after NCCL starts (its loader
    is a thread); a multi-process loader would have to start its workers before NCCL."""
    if machine.efa_hugepages:
        return {HUGEPAGES_RESOURCE: HUGEPAGES_QUANTITY}
    return {}


def node_hugepages(machine: Machine) -> dict[str, str]:
    """The least an EFA node of this machine offers, as Cluster Autoscaler's node-template
    resource tag wants it (a pod-spec quantity), so a group at zero nodes can take a pod that
    asks; a lower bound, so the autoscaler never starts a node the pod would not fit."""
    if hugepages(machine):
        pages = machine.vcpus * EFA_HUGEPAGE_MIB_PER_VCPU // 2 + 1
        return {HUGEPAGES_RESOURCE: f"{pages * 2}Mi"}
    return {}


def efa_env(machine: Machine) -> dict[str, str]:
    """NCCL and libfabric settings for an EFA machine, every one forcing or tuning EFA."""
    env = {
        # NCCL loads aws-ofi-nccl only when asked: the image removed its libnccl-net.so copy.
        "NCCL_NET_PLUGIN": OFI_PLUGIN,
        # The only network NCCL may use: no plugin or no EFA -> ncclInvalidUsage, not sockets.
        "NCCL_NET": OFI_NETWORK,
        # libfabric may open the efa provider only: no silent fall-back to its tcp/sockets
        # providers (aws-ofi-nccl would otherwise accept another provider).
        "FI_PROVIDER": "efa",
        # NCCL >= 2.21 finds the tuner in the net plugin by itself; naming it, as the EKS p5
        # manifest does, keeps it when a tuner elsewhere on the path would win.
        "NCCL_TUNER_PLUGIN": OFI_PLUGIN,
        # DataLoader workers fork after EFA memory registration. The plugin sets this itself
        # for supported libfabric versions; the EKS manifests still set it.
        "FI_EFA_FORK_SAFE": "1",
        # Bootstrap and out-of-band traffic: any interface but loopback (the pod has eth0).
        "NCCL_SOCKET_IFNAME": "^lo",
        "NCCL_DEBUG": "WARN",  # the fabric gate raises it to INFO into a file (trainer/fabric_gate.py)
    }
    if not hugepages(machine):
        # The pod is granted no huge pages (see `hugepages`): without a hugetlb allowance a
        # huge-page fault kills the process (SIGBUS), and forked DataLoader workers fail with
        # "Cannot allocate memory" (aws-ofi-nccl doc/efa-env-var.md); a minor cost.
        env["FI_EFA_USE_HUGE_PAGE"] = "0"
    if machine.efa_device_rdma:
        # GPUDirect RDMA over EFA. Not needed with libfabric >= 1.18 and aws-ofi-nccl >= 1.7
        # (doc/efa-env-var.md: "not harmful ... on p4/p5"); set so an older image still uses it.
        env["FI_EFA_USE_DEVICE_RDMA"] = "1"
    return env


def efa_interconnect(machine: Machine, fabric: bool) -> InterconnectSpec:
    """EFA resources and env for the job's machine; plain TCP sockets when the fabric is off.

    No capability: EFA pins memory against RLIMIT_MEMLOCK, which the GPU nodes' containerd
    already gives containers unlimited (infra/aws/node_groups.py GPU_NODE_USER_DATA), and the
    trainer runs as uid 1000, for whom IPC_LOCK would do nothing (a non-root process loses its
    capabilities at execve, capabilities(7); Kubernetes sets no ambient ones). IPC_LOCK is also
    outside the Pod Security "baseline" level, so asking for it would make the job's namespace
    enforce "privileged" (workloads/identity.py) for nothing."""
    if not uses_efa(machine, fabric):
        return InterconnectSpec(pod_resources={}, env={"NCCL_DEBUG": "WARN"})
    return InterconnectSpec(
        pod_resources={EFA_RESOURCE: machine.efa_interfaces, **hugepages(machine)},
        env=efa_env(machine),
        fabric_rails=machine.efa_interfaces,  # aws-ofi-nccl logs "found <n> nics"
    )
