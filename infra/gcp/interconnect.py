"""What a pod needs for the fabric on GKE: sockets over gVNIC (A2, or the fabric off), or
GPUDirect-TCPX (A3 High, a3-highgpu-8g) or GPUDirect-TCPXO (A3 Mega, a3-megagpu-8g).

GPUDirect moves GPU memory straight to extra NICs: 4 on A3 High, 8 on A3 Mega. The pieces,
as GoogleCloudPlatform/cluster-toolkit's GKE A3 blueprints set them up
(examples/gke-a3-highgpu/gke-a3-highgpu.yaml, examples/gke-a3-megagpu/gke-a3-megagpu.yaml):
- one extra VPC and subnet per GPU NIC, MTU 8244 (network.py), attached to the GPU nodes as
  additional node networks (node_pools.py), on a cluster with multi-networking and Dataplane V2
  (cluster.py);
- per extra VPC a GKENetworkParamSet and a Network object, the NCCL plugin installer and the NRI
  device injector DaemonSets (gpudirect.py);
- in the job's pod (this file, handed over in the contract): the multi-network and device
  annotations, the receive-datapath manager (rxdm) as a sidecar with its host volumes, and the
  NCCL environment. cluster-toolkit adds these to a workload with
  modules/compute/gke-node-pool/gpu-direct-workload/scripts/enable-tcpx(o)-in-workload.py.
Versions are pinned as one release: the plugin installer and the rxdm move together
(container-engine-accelerators gpudirect-tcpxo/README.md: "The tcpxo-daemon version is coupled
with the NCCL plugin installer version").
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pulumi_kubernetes as k8s

from infra.catalog.machines import Interconnect, Machine
from infra.contract import InterconnectSpec

core = k8s.core.v1

# A2 (and any machine without fabric, or with fabric off): NCCL over the gVNIC on eth0.
SOCKET_ENV = {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "WARN"}

GPU_VPC_MTU = 8244  # both blueprints: modules/network/multivpc `mtu: 8244` for the GPU VPCs
NVIDIA_LIB64 = "/usr/local/nvidia/lib64"  # where the plugin installer's libraries appear in pods
HOST_NVIDIA = "/home/kubernetes/bin/nvidia"  # GKE's driver directory on COS nodes
# Which NCCL runs: torch's own, never the NCCL core the plugin installer copies next to its
# plugin (gpudirect-tcpx(o) README.md "Compatible NCCL version" recommends that one: 2.19.4 for
# TCPX v3.1.12, 2.28.7 for TCPXO v1.0.15). torch 2.13.0 is built against NCCL 2.29.7 and its
# libtorch_cuda.so needs 46 nccl* symbols (nm -D --undefined-only, PyPI's torch-2.13.0 wheel);
# libnccl.so.2 of nvidia-nccl-cu12 2.19.3 lacks 16 of them (ncclAlltoAll, ncclCommShrink,
# ncclCommWindowRegister, ...) and 2.28.7 lacks 8 (ncclCommSuspend/Resume/MemStats, ncclSignal,
# ncclPutSignal, ncclWaitSignal, ncclGetPeerDevicePointer, ncclGetLsaMultimemDevicePointer).
# All are strong undefined symbols, and Python loads torch._C (whose dependencies bring
# libtorch_cuda) with sys.getdlopenflags() = RTLD_NOW, which binds every one at load: with
# either older NCCL preloaded, `import torch` fails ("undefined symbol"). Were it bound lazily,
# the process would die with "symbol lookup error" at the first call of a missing one (under
# 2.19 the first all_to_all: torch/csrc/cuda/nccl.cpp calls ncclAlltoAll when built against
# NCCL >= 2.28). So neither is preloaded, on TCPX nor on TCPXO.
# torch's libtorch_cuda finds the nvidia-nccl wheel's libnccl.so.2 through its RPATH, searched
# before LD_LIBRARY_PATH, so LD_LIBRARY_PATH only lets NCCL dlopen Google's net plugin
# (libnccl-net.so) and TCPXO's tuner from the installer's folder. NCCL 2.29.7 looks up net
# plugin API v6 to v11 and tuner API v2 to v5 (the ncclNetPlugin_vN / ncclTunerPlugin_vN names
# in its libnccl.so.2; NVIDIA/nccl ext-net/README.md "Struct versioning": a plugin exports the
# versioned structs it implements and NCCL takes the newest it knows): the same as 2.28.7, the
# NCCL TCPXO's plugin is qualified with, and v7, the newest 2.19 knows (v5 to v7), which the
# TCPX plugin's network "GPUDirectTCPX_v7" implements (google/nccl-plugin-gpudirecttcpx
# src/nccl_plugin.cc); its device-side unpack keeps NCCL_NET_DEVICE_UNPACK_VERSION 0x7, which
# NCCL's net_device.h has not changed since 2.19. The fabric gate requires torch's NCCL on
# every rank before any collective (trainer/fabric_gate.py, --fabric_nccl_version), and its
# transport check fails a node whose NCCL did not load the plugin (it falls back to sockets).
REQUIREMENTS_GPU = Path(__file__).resolve().parents[2] / "trainer" / "requirements-gpu.txt"


def torch_nccl_version(requirements: Path = REQUIREMENTS_GPU) -> str:
    """The NCCL the trainer image's torch runs with: the nvidia-nccl-cu12 pin of
    trainer/requirements-gpu.txt (the image build fails unless torch declares that exact pin)."""
    found = re.search(r"^nvidia-nccl-cu12==(\d+\.\d+\.\d+)\s*$", requirements.read_text(),
                      re.MULTILINE)
    if found is None:
        raise ValueError(f"{requirements} pins no nvidia-nccl-cu12==X.Y.Z")
    return found.group(1)


# container-engine-accelerators gpudirect-tcpx/README.md, release "Jun 22, 2026" (plugin v3.1.12,
# rxdm v2.0.15), "NCCL configs", as cluster-toolkit examples/gke-a3-highgpu/nccl-config.yaml
# (run-nccl.sh) sets them but for NCCL_ALGO, which that release widens from Ring to Ring,Tree:
# eth0 is the control NIC, eth1-eth4 carry GPU traffic; the bindings pin the NICs' threads to
# the CPUs on the same NUMA node as their GPUs. The unix client prefix is the folder the rxdm
# serves its sockets in (--uds_path /run/tcpx), mounted into the trainer at the same path.
TCPX_ENV = {
    "NCCL_SOCKET_IFNAME": "eth0",
    "NCCL_CROSS_NIC": "0",
    "NCCL_ALGO": "Ring,Tree",
    "NCCL_PROTO": "Simple",
    "NCCL_NSOCKS_PERTHREAD": "4",
    "NCCL_SOCKET_NTHREADS": "1",
    "NCCL_DYNAMIC_CHUNK_SIZE": "524288",
    "NCCL_P2P_NET_CHUNKSIZE": "524288",
    "NCCL_P2P_PCI_CHUNKSIZE": "524288",
    "NCCL_P2P_NVL_CHUNKSIZE": "1048576",
    "NCCL_BUFFSIZE": "4194304",
    "NCCL_NET_GDR_LEVEL": "PIX",
    "NCCL_P2P_PXN_LEVEL": "0",
    "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME": "eth1,eth2,eth3,eth4",
    "NCCL_GPUDIRECTTCPX_CTRL_DEV": "eth0",
    "NCCL_GPUDIRECTTCPX_TX_BINDINGS":
        "eth1:8-21,112-125;eth2:8-21,112-125;eth3:60-73,164-177;eth4:60-73,164-177",
    "NCCL_GPUDIRECTTCPX_RX_BINDINGS":
        "eth1:22-35,126-139;eth2:22-35,126-139;eth3:74-87,178-191;eth4:74-87,178-191",
    "NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS": "500000",
    "NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX": "/run/tcpx",
    "NCCL_DEBUG": "WARN",
    # enable-tcpx-in-workload.py (update_gpu_containers): the plugin from the installer's folder
    # (its LD_PRELOAD of the installer's NCCL is left out: see torch_nccl_version above).
    "LD_LIBRARY_PATH": NVIDIA_LIB64,
}

# container-engine-accelerators gpudirect-tcpxo/README.md, release "Jan 9, 2026" (plugin
# v1.0.15, rxdm v1.0.21), "NCCL configs", with the tuner and guest-config files at the
# installer's library folder as it appears in the pod (the notes: "replace ... as the NCCL lib
# directory installed inside the workload container"). The guest config checker aborts a
# workload whose NCCL_NVLSTREE_MAX_CHUNKSIZE differs (release "Aug 21, 2025").
TCPXO_ENV = {
    "NCCL_FASTRAK_CTRL_DEV": "eth0",
    "NCCL_FASTRAK_IFNAME": "eth1,eth2,eth3,eth4,eth5,eth6,eth7,eth8",
    "NCCL_SOCKET_IFNAME": "eth0",
    "NCCL_CROSS_NIC": "0",
    "NCCL_PROTO": "Simple,LL128",
    "NCCL_MIN_NCHANNELS": "4",
    "NCCL_TUNER_PLUGIN": "libnccl-tuner.so",
    "NCCL_TUNER_CONFIG_PATH": f"{NVIDIA_LIB64}/a3plus_tuner_config.textproto",
    "NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE": f"{NVIDIA_LIB64}/a3plus_guest_config.textproto",
    "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
    "NCCL_NVLSTREE_MAX_CHUNKSIZE": "131072",
    "NCCL_P2P_NET_CHUNKSIZE": "524288",
    "NCCL_P2P_PCI_CHUNKSIZE": "524288",
    "NCCL_P2P_NVL_CHUNKSIZE": "1048576",
    "NCCL_FASTRAK_NUM_FLOWS": "2",
    "NCCL_FASTRAK_USE_SNAP": "1",
    "NCCL_FASTRAK_PLUGIN_ACCEPT_TIMEOUT_MS": "600000",
    "NCCL_FASTRAK_ENABLE_CONTROL_CHANNEL": "0",
    "NCCL_BUFFSIZE": "8388608",
    "NCCL_NET_GDR_LEVEL": "PIX",
    "NCCL_FASTRAK_ENABLE_HOTPATH_LOGGING": "0",
    "NCCL_FASTRAK_USE_LLCM": "1",
    "NCCL_NVLS_ENABLE": "1",
    "NCCL_DEBUG": "WARN",
    # enable-tcpxo-in-workload.py (update_gpu_containers), without its LD_PRELOAD (above).
    "LD_LIBRARY_PATH": NVIDIA_LIB64,
    "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY": "/dev/aperture_devices",
}

# The TCPX rxdm's last sockets, present once it serves the plugin (rxdm_sidecar).
TCPX_RXDM_SOCKETS = ("rx_rule_manager", "rx_rule_uninstall", "queue_ids_by_gpu")
TCPX_RXDM_READY = " && ".join(f"test -S /run/tcpx/{name}" for name in TCPX_RXDM_SOCKETS)
# Nothing else orders the trainer after the NCCL plugin installer DaemonSet: on a fresh node
# (the first `up`, every spot replacement) NCCL could start before the installer has copied
# libnccl-net.so, fall back to sockets, and the enforcing gate would taint a healthy node for its
# transport. The sidecar's startup probe (which holds the trainer back) also waits for the file;
# both sidecars see the installer's folder (TCPX at NVIDIA_LIB64, TCPXO under /usr/local/nvidia).
NCCL_PLUGIN_READY = f"test -e {NVIDIA_LIB64}/libnccl-net.so"

GPU_CONTROL_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm")


def gpu_devices(gpu: Machine) -> tuple[str, ...]:
    """The GPU devices the NRI injector puts into the rxdm sidecar: one /dev/nvidia<i> per GPU
    of the machine (the catalog's gpu_count), then the driver's control devices
    (enable-tcpx(o)-in-workload.py add_annotations lists /dev/nvidia0..7 for the 8-GPU A3)."""
    return (*(f"/dev/nvidia{index}" for index in range(gpu.gpu_count)), *GPU_CONTROL_DEVICES)


@dataclass(frozen=True)
class GpuDirect:
    """One GPUDirect flavour: its NICs, pinned images and what its pod carries."""

    interconnect: Interconnect
    nics: int  # extra GPU NICs = extra VPCs, eth1..ethN in the pod
    installer_image: str  # the NCCL plugin installer DaemonSet's image
    rxdm_image: str  # the receive-datapath manager, run as the pod's sidecar
    sidecar: str  # the sidecar's container name (the device annotation is keyed by it)
    devices: tuple[str, ...]  # what the NRI injector puts into the sidecar beside the GPUs
    env: Mapping[str, str]
    # The NCCL release Google qualifies with this plugin (README.md "Compatible NCCL version",
    # "qualified and supported"). Recorded to track Google's releases; not the NCCL that runs
    # (torch's, torch_nccl_version: an older one cannot serve torch 2.13).
    qualified_nccl: str
    # What the trainer container adds to root's empty capability set: what the reference NCCL
    # container adds (interconnect_spec).
    trainer_capabilities: tuple[str, ...] = ()
    host_volumes: Mapping[str, str] = field(default_factory=dict)  # name -> host path


# Google's NCCL containers (gpudirect-tcpx(o)/nccl-test-unprivileged-without-hostnetwork.yaml)
# run as root with the runtime's default capabilities, adding IPC_LOCK on TCPX: containerd's
# default set (containerd pkg/oci/spec.go defaultUnixCaps). The trainer keeps the ones root
# needs to work in folders it does not own (the shared file system's job folders belong to uid
# 1000: DAC_OVERRIDE, DAC_READ_SEARCH is not in the set, FOWNER, CHOWN, FSETID) and to manage its
# own processes (KILL, SETUID, SETGID, SETPCAP, SETFCAP, SYS_CHROOT, NET_BIND_SERVICE,
# AUDIT_WRITE), and drops NET_RAW (raw sockets: packet spoofing on the pod network; the plugins
# open TCP sockets only) and MKNOD (the GPUs and aperture devices come from the device plugin
# and the NRI injector, never a mknod).
REFERENCE_DEFAULT_CAPABILITIES = ("AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID",
                                  "KILL", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP",
                                  "SETUID", "SYS_CHROOT")

GPUDIRECT: dict[Interconnect, GpuDirect] = {
    # container-engine-accelerators gpudirect-tcpx/README.md, newest release "Jun 22, 2026":
    # installer v3.1.12, tcpx-daemon v2.0.15 (coupled), "qualified and supported: NCCL 2.19.4".
    # Google's manifests in the same repository and cluster-toolkit (gpu_direct.tf, the A3 High
    # blueprint) still name the February 2024 pair, v3.1.9 and v2.0.12. min_additional_networks
    # 4 (gpu_direct.tf).
    Interconnect.GPUDIRECT_TCPX: GpuDirect(
        interconnect=Interconnect.GPUDIRECT_TCPX,
        nics=4,
        installer_image="us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.12",
        rxdm_image="us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.15",
        sidecar="tcpx-daemon",
        devices=(),
        env=TCPX_ENV,
        qualified_nccl="2.19.4",
        # gpudirect-tcpx/nccl-test-unprivileged-without-hostnetwork.yaml: the NCCL container
        # keeps the defaults and adds IPC_LOCK (the plugin pins the buffers it shares with the
        # rxdm).
        trainer_capabilities=tuple(sorted((*REFERENCE_DEFAULT_CAPABILITIES, "IPC_LOCK"))),
        # enable-tcpx-in-workload.py add_volumes ("tcpx-socket" is an emptyDir, below).
        host_volumes={"libraries": f"{HOST_NVIDIA}/lib64", "sys": "/sys", "proc-sys": "/proc/sys"},
    ),
    # container-engine-accelerators gpudirect-tcpxo/README.md, newest release "Jan 9, 2026":
    # installer v1.0.15, tcpxo-daemon v1.0.21; the A3 Mega blueprint pins nccl_tcpxo_version
    # v1.0.15 and its nccl-test-latest.yaml runs rxdm v1.0.21. min_additional_networks 8
    # (gpu_direct.tf).
    Interconnect.GPUDIRECT_TCPXO: GpuDirect(
        interconnect=Interconnect.GPUDIRECT_TCPXO,
        nics=8,
        installer_image="us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.15",
        rxdm_image="us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21",
        sidecar="tcpxo-daemon",
        devices=("/dev/dmabuf_import_helper",),
        env=TCPXO_ENV,
        qualified_nccl="2.28.7",  # "qualified and supported: NCCL 2.28.7-1" (-1: the package)
        # gpudirect-tcpxo/nccl-test-unprivileged-without-hostnetwork.yaml: the NCCL container
        # keeps the defaults and adds nothing.
        trainer_capabilities=REFERENCE_DEFAULT_CAPABILITIES,
        # enable-tcpxo-in-workload.py add_volumes, but the node's NVIDIA lib64 alone, as
        # Google's Autopilot reference mounts it into the rxdm (gpudirect-tcpxo/
        # nccl-test-latest-autopilot.yaml: hostPath /home/kubernetes/bin/nvidia/lib64 at
        # /usr/local/nvidia/lib64), not the whole install folder with its binaries.
        host_volumes={"libraries": f"{HOST_NVIDIA}/lib64", "sys": "/sys",
                      "proc-sys": "/proc/sys", "aperture-devices": "/dev/aperture_devices"},
    ),
}


def gpudirect_for(gpu: Machine, fabric: bool) -> GpuDirect | None:
    """The GPUDirect flavour this program sets up for `gpu`, or None (sockets over gVNIC).
    RDMA machines (A3 Ultra, A4) are refused earlier, by the settings rule
    gcp_fabric_is_one_this_program_sets_up."""
    return GPUDIRECT.get(gpu.interconnect) if fabric else None


def gpu_network_name(nic: int) -> str:
    """The Kubernetes Network object for GPU NIC `nic` (1-based): vpc1, vpc2, ... as the
    blueprints name them (gke-cluster `k8s_network_names: {gvnic_prefix: vpc,
    gvnic_start_index: 1}`) and the pod annotation refers to them."""
    return f"vpc{nic}"


def pod_annotations(direct: GpuDirect, gpu: Machine) -> dict[str, str]:
    """eth0 on the cluster's own network, ethN on vpcN; the machine's GPUs and the flavour's
    devices injected into the sidecar (enable-tcpx(o)-in-workload.py add_annotations)."""
    interfaces = [{"interfaceName": "eth0", "network": "default"}] + [
        {"interfaceName": f"eth{n}", "network": gpu_network_name(n)}
        for n in range(1, direct.nics + 1)]
    return {
        "networking.gke.io/default-interface": "eth0",
        "networking.gke.io/interfaces": json.dumps(interfaces),
        f"devices.gke.io/container.{direct.sidecar}":
            "".join(f"- path: {device}\n" for device in (*gpu_devices(gpu), *direct.devices)),
    }


def pod_volumes(direct: GpuDirect) -> list[core.VolumeArgs]:
    volumes = [core.VolumeArgs(name=name, host_path=core.HostPathVolumeSourceArgs(path=path))
               for name, path in direct.host_volumes.items()]
    if direct.interconnect == Interconnect.GPUDIRECT_TCPX:
        # The rxdm's unix sockets, shared with the trainer only.
        volumes.append(core.VolumeArgs(name="tcpx-socket", empty_dir=core.EmptyDirVolumeSourceArgs()))
    return volumes


def trainer_volume_mounts(direct: GpuDirect) -> list[core.VolumeMountArgs]:
    """enable-tcpx(o)-in-workload.py update_gpu_containers. TCPX's script mounts the sockets at
    /tmp; here they go to /run/tcpx (NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX) because the trainer
    has its own writable /tmp."""
    if direct.interconnect == Interconnect.GPUDIRECT_TCPX:
        # The node's driver and plugin libraries: read, never written, by the trainer.
        return [core.VolumeMountArgs(name="tcpx-socket", mount_path="/run/tcpx"),
                core.VolumeMountArgs(name="libraries", mount_path=NVIDIA_LIB64, read_only=True)]
    return [core.VolumeMountArgs(name="aperture-devices", mount_path="/dev/aperture_devices")]


def _rxdm_security(capabilities: list[str]) -> core.SecurityContextArgs:
    """What the references give the rxdm (container-engine-accelerators
    gpudirect-tcpx/nccl-test-unprivileged-without-hostnetwork.yaml: NET_ADMIN;
    gpudirect-tcpxo/nccl-test-unprivileged-without-hostnetwork.yaml and
    nccl-test-latest-autopilot.yaml: NET_ADMIN and NET_BIND_SERVICE, added to the runtime's
    default set; no runAsUser, so the image's root), and nothing more: not privileged, root as
    Google runs it (it programs the NICs' flow steering through /hostsysfs and
    /hostprocsysfs), a writable root file system (TCPXO's entrypoint chmods itself and writes
    its health file under /run). Of the runtime's defaults it keeps what the trainer keeps
    (REFERENCE_DEFAULT_CAPABILITIES) and drops NET_RAW (raw sockets: packet spoofing on the
    pod network; flow steering is ethtool/netlink under NET_ADMIN) and MKNOD (its GPU and
    dma-buf devices come from the NRI injector's annotation, never a mknod). The pod's
    RuntimeDefault seccomp profile applies: GKE Autopilot, which imposes it, runs the same rxdm
    (gpudirect-tcpxo/nccl-test-latest-autopilot.yaml)."""
    return core.SecurityContextArgs(
        privileged=False,
        allow_privilege_escalation=False,
        run_as_user=0,
        run_as_group=0,
        run_as_non_root=False,
        read_only_root_filesystem=False,
        capabilities=core.CapabilitiesArgs(
            drop=["ALL"], add=sorted({*REFERENCE_DEFAULT_CAPABILITIES, *capabilities})),
    )


def rxdm_sidecar(direct: GpuDirect) -> core.ContainerArgs:
    """The receive-datapath manager, as a Kubernetes native sidecar.

    The references run it as an ordinary container beside the workload, which keeps a Job's
    pod running after the trainer has finished; container-engine-accelerators
    gpudirect-tcpxo/best-practice.md ("Automatic Sidecar Termination") moves it to
    `initContainers` with `restartPolicy: Always` instead: the kubelet starts it before the
    trainer and stops it once the trainer has exited, so the pod completes (or fails) with the
    trainer's own exit status and the Job's podFailurePolicy sees only the trainer. Native
    sidecars are on by default from Kubernetes 1.29 and GA in 1.33.
    """
    if direct.interconnect == Interconnect.GPUDIRECT_TCPX:
        return core.ContainerArgs(
            name=direct.sidecar,
            image=direct.rxdm_image,
            image_pull_policy="Always",
            restart_policy="Always",
            # enable-tcpx-in-workload.py add_tcpx_daemon_container, argument for argument
            # (the last one, backslashes and quotes included, is what its YAML passes).
            command=["/tcpgpudmarxd/build/app/tcpgpudmarxd", "--gpu_nic_preset", "a3vm",
                     "--gpu_shmem_type", "fd", "--uds_path", "/run/tcpx",
                     "--setup_param", '\\"--verbose 128 2 0 \\"'],
            security_context=_rxdm_security(["NET_ADMIN"]),
            # The libraries are only loaded (read-only); /hostsysfs and /hostprocsysfs stay
            # writable: the rxdm tunes the GPU NICs' sysctls and queues through them (the
            # references' mounts, google/tcpgpudmarxd setup).
            volume_mounts=[
                core.VolumeMountArgs(name="libraries", mount_path=NVIDIA_LIB64, read_only=True),
                core.VolumeMountArgs(name="tcpx-socket", mount_path="/run/tcpx"),
                core.VolumeMountArgs(name="sys", mount_path="/hostsysfs"),
                core.VolumeMountArgs(name="proc-sys", mount_path="/hostprocsysfs"),
            ],
            env=[core.EnvVarArgs(name="LD_LIBRARY_PATH", value=NVIDIA_LIB64)],
            # On a native sidecar the trainer starts only once this probe passes: NCCL must not
            # start before the rxdm serves /run/tcpx, or the plugin finds no rxdm and NCCL runs
            # on sockets, and the gate taints a healthy node. The rxdm binds its unix sockets
            # last, after the NIC set-up and tuning script (google/tcpgpudmarxd
            # app/tcpgpudmarxd.cu: gpu_page_exporter->Export(), setup.sh, then
            # rx_rule_manager.Init(), which starts "rx_rule_manager", "rx_rule_uninstall" and
            # "queue_ids_by_gpu" under --uds_path, src/rx_rule_manager.cc). Google's TCPX
            # references have no probe (they run the rxdm as an ordinary container beside
            # NCCL); the budget is TCPXO's (below), 2 minutes.
            startup_probe=core.ProbeArgs(
                exec_=core.ExecActionArgs(command=["/bin/sh", "-c",
                                                   f"{TCPX_RXDM_READY} && {NCCL_PLUGIN_READY}"]),
                initial_delay_seconds=1, period_seconds=5, timeout_seconds=1,
                success_threshold=1, failure_threshold=24),
        )
    return core.ContainerArgs(
        name=direct.sidecar,
        image=direct.rxdm_image,
        image_pull_policy="Always",
        restart_policy="Always",
        # gpudirect-tcpxo/nccl-test-latest.yaml; --num_nics is retired and --uid=
        # --alsologtostderr obsolete (README.md, releases "Nov 19, 2025" and "Aug 21, 2025").
        command=["/bin/sh", "-c"],
        args=["set -ex\nchmod 755 /fts/entrypoint_rxdm_container.sh\n"
              "/fts/entrypoint_rxdm_container.sh --num_hops=2\n"],
        security_context=_rxdm_security(["NET_ADMIN", "NET_BIND_SERVICE"]),
        # The libraries only loaded (LD_LIBRARY_PATH), so read-only (the Autopilot reference's
        # mount, above); /hostsysfs and /hostprocsysfs stay writable: it tunes the NICs there.
        volume_mounts=[
            core.VolumeMountArgs(name="libraries", mount_path=NVIDIA_LIB64, read_only=True),
            core.VolumeMountArgs(name="sys", mount_path="/hostsysfs"),
            core.VolumeMountArgs(name="proc-sys", mount_path="/hostprocsysfs"),
        ],
        env=[core.EnvVarArgs(name="LD_LIBRARY_PATH", value=NVIDIA_LIB64),
             core.EnvVarArgs(name="HEALTH_CHECK_LOG_FILE", value="/run/health-check")],
        # best-practice.md "Setup Startup Probe for the TCPXO-daemon Sidecar": the file appears
        # once the buffer manager is up ("typically ~30 s"). On a native sidecar the trainer
        # starts only after this probe passes, so NCCL never races the rxdm's start. The
        # reference's 6 tries x 5 s (~31 s) leaves no slack over that: a slow start would
        # restart the sidecar with back-off and hold the pod in its start-up phase, where no
        # failure rule sees it; 24 tries give it 2 minutes.
        startup_probe=core.ProbeArgs(
            exec_=core.ExecActionArgs(command=["/bin/sh", "-c",
                                               f"cat /run/health-check && {NCCL_PLUGIN_READY}"]),
            initial_delay_seconds=1, period_seconds=5, timeout_seconds=1,
            success_threshold=1, failure_threshold=24),
    )


def interconnect_spec(gpu: Machine, fabric: bool) -> InterconnectSpec:
    """What a pod on `gpu` needs; GKE exposes no fabric device resource, so none is requested.

    With GPUDirect the pod mounts host paths and runs a root sidecar holding NET_ADMIN, which
    the Pod Security "baseline" level refuses: the job's namespace must enforce "privileged".

    The trainer runs as root there, as the NCCL container of every Google TCPX/TCPXO reference
    does (container-engine-accelerators gpudirect-tcpx(o)/nccl-test*.yaml, cluster-toolkit
    examples/gke-a3-*/nccl-test*.yaml: no runAsUser, the image's root). That uid 1000 would work
    is not shown: the rxdm's sockets are world-writable (tcpgpudmarxd app/tcpgpudmarxd.cu
    `umask(0)` before it binds them), but the plugin sends with SO_ZEROCOPY
    (nccl-plugin-gpudirecttcpx src/connect.cc), whose pinned pages the kernel charges to
    RLIMIT_MEMLOCK unless the process holds IPC_LOCK (Linux net/core/skbuff.c
    mm_account_pinned_pages), a capability a non-root uid loses at execve; and no Google
    reference runs the plugin's DMA-buf path as another user. Otherwise the container stays
    locked down (workloads/pod.py): not privileged, no privilege escalation, read-only root file
    system, RuntimeDefault seccomp, and every capability dropped but the reference NCCL
    container's (the runtime defaults less NET_RAW and MKNOD, REFERENCE_DEFAULT_CAPABILITIES,
    plus IPC_LOCK for TCPX). On Filestore (no root squash) root writes the job's folders the
    preparer gives to uid 1000 through DAC_OVERRIDE, which a root with every capability dropped
    would lack.
    """
    direct = gpudirect_for(gpu, fabric)
    if direct is None:
        return InterconnectSpec(pod_resources={}, env=dict(SOCKET_ENV))
    return InterconnectSpec(
        pod_resources={},
        env=dict(direct.env),
        pod_annotations=pod_annotations(direct, gpu),
        volumes=pod_volumes(direct),
        trainer_volume_mounts=trainer_volume_mounts(direct),
        sidecars=[rxdm_sidecar(direct)],
        capabilities=direct.trainer_capabilities,
        privileged_pod_security=True,
        trainer_runs_as_root=True,
        nccl_version=torch_nccl_version(),
    )
