"""NCCL settings per GPU machine: plain sockets over gVNIC (A2), or GPUDirect-TCPX (A3 High).

GPUDirect-TCPX moves GPU memory straight to four extra NICs. Its pod-side pieces (the NCCL
plugin installer, the tcpx receive-datapath sidecar, the NRI device injector and the extra
VPCs with GKE multi-networking) are NOT created by this program: see README.md, "A3 and GPUDirect". Without
them NCCL falls back to sockets on eth0, so the environment below is safe on its own.
"""

from __future__ import annotations

from infra.catalog import Interconnect, Machine
from infra.contract import InterconnectSpec

# A2 (and any machine without fabric, or with fabric off): NCCL over the gVNIC on eth0.
SOCKET_ENV = {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "WARN"}

# GKE's "Maximize GPU network bandwidth" guide for a3-highgpu-8g (GPUDirect-TCPX): eth0 is the
# control NIC, eth1-eth4 carry GPU traffic; the bindings pin the NICs' threads to the CPUs on
# the same NUMA node as their GPUs.
TCPX_ENV = {
    "NCCL_SOCKET_IFNAME": "eth0",
    "NCCL_CROSS_NIC": "0",
    "NCCL_ALGO": "Ring",
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
    "NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS": "50000",
    "NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX": "/run/tcpx",
    "NCCL_GPUDIRECTTCPX_FORCE_ACK": "0",
    "NCCL_DEBUG": "WARN",
}


def interconnect_spec(gpu: Machine, fabric: bool) -> InterconnectSpec:
    """What a pod on `gpu` needs; GKE exposes no fabric device resource, so none is requested."""
    if fabric and gpu.interconnect == Interconnect.GPUDIRECT_TCPX:
        return InterconnectSpec(pod_resources={}, env=dict(TCPX_ENV))
    return InterconnectSpec(pod_resources={}, env=dict(SOCKET_ENV))
