"""Fabric gate: a short collective test on every rank before any training work.

A job whose nodes silently fell back from the fabric (EFA, InfiniBand, GPUDirect-TCPX/TCPXO) to
plain sockets, or that landed on a slow GPU, still trains, just many times slower, and nothing
fails. So before the model is built, every rank times its share of a fixed matmul, runs
all_reduce and all_to_all at a few message sizes up to the bandwidth plateau, checks its GPU's
health (trainer/gpu_health.py), and reads which network NCCL chose from its own INFO log. The
figures are printed (and recorded in the metrics JSON lines). With ``--fabric_gate enforce``:

- a problem of one node (its GPU unhealthy or under the matmul floor, a wrong transport or
  missing fabric NICs there, its RDMA set-up, a rank much slower than the others) names that
  node (the pod's spec.nodeName, env NODE_NAME), and the gate leaves it out: rank 0 taints it
  (trainer/node_taint.py) and every rank exits NODE_LEFT_OUT, so the gang restarts on other
  nodes without using the retry budget; at most ``--fabric_max_nodes_left_out`` nodes, and
  without API access, FABRIC_ERROR instead;
- all_reduce or all_to_all bus bandwidth under the machine's floors (``--fabric_floor_gbps``,
  ``--fabric_all_to_all_floor_gbps``, judged at the largest size: infra/catalog.py
  fabric_floor, each with its published source) names no node: one degraded link lowers every
  rank's figure (on 2 nodes the bad one cannot be told apart), so the gate leaves out every node
  of the gang, within the same bound, and the gang restarts on fresh nodes; past the bound
  (taints already on nodes count), FABRIC_ERROR;
- in ``report`` mode (a stack without a fabric, e.g. GKE A2 with ``fabric: false``) only a GPU
  health problem (trainer/gpu_health.py, or the matmul floor) is acted on: its node is left
  out the same way, so a bad GPU is never kept on any stack; without API access, or past the
  bound, report mode only reports it and trains on;
- either verdict only after one full retry of the measurement, so one noisy run passes;
- a wrong NCCL (``--fabric_nccl_version``, torch's own) is judged first, before any
  collective, and names the node: an older NCCL that lacks a symbol torch calls (ncclAlltoAll
  in all_to_all_single under NCCL 2.19) ends a lazily bound process at that call with "symbol
  lookup error", which names nothing (with Python's default RTLD_NOW, torch does not import).

Bus bandwidth follows nccl-tests (doc/PERFORMANCE.md): all_reduce busbw = algbw * 2(n-1)/n,
all_to_all busbw = algbw * (n-1)/n, algbw = bytes / time of the slowest rank.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import re
import resource
import socket
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import (TYPE_CHECKING, Callable, Dict, Iterable, List, Mapping, Optional, Sequence,
                    Tuple)

import torch
import torch.distributed as dist

from trainer.exit_codes import FABRIC_ERROR, NODE_LEFT_OUT
from trainer.gpu_health import gpu_problems
from trainer.node_taint import NODE_NAME_ENV, KubeApi, KubeApiError, leave_out

if TYPE_CHECKING:  # trainer.distributed imports TorchRec: the log parser's tests need none of it
    from trainer.config import TrainConfig
    from trainer.distributed import DistContext

log = logging.getLogger("trainer.fabric_gate")

# Bytes. At 128 MiB every fabric here is still climbing (2x p5: 289 GB/s at 128 MiB, 479 at
# 8 GiB; 2x A3 Mega: 152 and 339): the stack passes the size its floor was published for.
GPU_SIZES = (1 << 20, 128 << 20, 1 << 30)
CPU_SIZES = (64 << 10, 1 << 20)  # gloo on a laptop: the whole gate takes about a second
# nccl-tests runs 5 warm-up and 20 timed iterations; at the plateau each call takes 0.1-1 s, so
# fewer suffice there. (warm-up, timed) for messages below / from LARGE_MESSAGE; CPU: tiny.
LARGE_MESSAGE = 1 << 30
GPU_ITERS = ((5, 20), (2, 5))
CPU_ITERS = (2, 5)
# A rank is "slow" when its matmul time exceeds this many times the median of the other ranks
# (and by more than SLOW_RANK_MIN_SECONDS, so a millisecond of jitter on small CPU runs is not news).
SLOW_RANK_FACTOR = 1.5
SLOW_RANK_MIN_SECONDS = 0.005
# Test-only hooks, named so that no one sets them by accident:
# - with TEST_DELAY_ENV set, no rank's compute is timed by the clock: every rank reports
#   TEST_COMPUTE_SECONDS and the rank it names (a number; "none": no rank) TEST_DELAY_SECONDS
#   more (a slow GPU), so a test judges an injected delay, never the test machine's jitter;
# - TEST_NCCL_LOG_ENV names a file read as if NCCL had written it (the transport check on gloo);
# - the rank in TEST_SICK_GPU_ENV reports TEST_SICK_GPU_PROBLEM from its GPU health check (CPU
#   ranks have no GPU to read).
TEST_SICK_GPU_ENV = "TORCHREC_CLOUD_GATE_TEST_SICK_GPU_RANK"
TEST_SICK_GPU_PROBLEM = "GPU 0: 2 uncorrected ECC errors"
TEST_DELAY_ENV = "TORCHREC_CLOUD_GATE_TEST_DELAY_RANK"
TEST_COMPUTE_SECONDS = 0.02
TEST_DELAY_SECONDS = 0.5
TEST_NCCL_LOG_ENV = "TORCHREC_CLOUD_GATE_TEST_NCCL_LOG"
NCCL_LOG_NAME = "nccl.%h.%p.log"  # NCCL expands %h (host) and %p (pid) in NCCL_DEBUG_FILE


# --- which network NCCL chose, from its INFO log ---

_USING_NETWORK = re.compile(r"NCCL INFO Using network (.+?)\s*$")  # NCCL core, once per comm
# "Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA": the network a connection runs on.
_CHANNEL_VIA_NET = re.compile(r"via NET/([^/\n]+)/")
_OFI_PROVIDER = re.compile(r"NET/OFI Selected [Pp]rovider is ([\w-]+)")  # aws-ofi-nccl
# Lines a network prints when it initialises, for logs without "Using network" (NCCL < 2.5
# printed none, and a plugin's own lines may be all a user pasted).
_NET_INIT_LINES = (
    (re.compile(r"NET/GPUDirectTCPX\b"), "tcpx"),
    (re.compile(r"NET/FasTrak\b"), "tcpxo"),
    (re.compile(r"NET/IB : Using \["), "ib"),
    (re.compile(r"NET/OFI Selected [Pp]rovider is efa\b"), "efa"),
    (re.compile(r"NET/FastSocket\b"), "socket"),
    (re.compile(r"NET/Socket : Using \["), "socket"),
)


def transport_of_network(name: str, ofi_provider: Optional[str] = None) -> str:
    """Our transport name for an NCCL network name ("IB", "IBext_v8", "AWS Libfabric", ...).

    IB covers RoCE too (NCCL drives both through IB verbs); Libfabric is EFA unless aws-ofi-nccl
    said it picked another provider (cxi, tcp), which is then named so it cannot pass for EFA.
    """
    key = name.strip().lower()
    if key.startswith("ib"):  # IB, IBext, IBext_v7/v8 (HPC-X's SHARP plugin)
        return "ib"
    if key.startswith("socket") or key.startswith("fastsocket"):  # GKE's Fast Socket is TCP too
        return "socket"
    if "libfabric" in key:  # "AWS Libfabric" (aws-ofi-nccl < 1.7), "Libfabric"
        return "efa" if ofi_provider in (None, "efa") else f"libfabric-{ofi_provider}"
    if key.startswith("gpudirecttcpx"):  # GPUDirectTCPX, GPUDirectTCPX_v7
        return "tcpx"
    if key.startswith("fastrak"):  # the GPUDirect-TCPXO plugin's network name
        return "tcpxo"
    return key.replace(" ", "-")


def parse_transport(text: str) -> Optional[str]:
    """The transport an NCCL INFO log says NCCL uses between nodes, or None if it does not say.

    NCCL's own "Using network X" lines decide; without them, the networks the channels were
    connected through; without those, the networks that initialised, a fabric winning over
    sockets (NCCL tries the fabric first and logs the socket interface for bootstrap as well).
    Several different answers (one process, several communicators) are joined with "+".
    """
    providers = _OFI_PROVIDER.findall(text)
    provider = providers[-1].lower() if providers else None
    for pattern in (_USING_NETWORK, _CHANNEL_VIA_NET):
        names = [m.group(1) for line in text.splitlines() for m in [pattern.search(line)] if m]
        if names:
            return "+".join(_unique(transport_of_network(n, provider) for n in names))
    found = _unique(transport for pattern, transport in _NET_INIT_LINES if pattern.search(text))
    fabrics = [t for t in found if t != "socket"]
    return "+".join(fabrics or found) or None


# The fabric NICs NCCL opened: aws-ofi-nccl's "Selected provider is efa, fabric is efa-direct
# (found 16 nics)"; NCCL's IB transport "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ... [RO]".
_OFI_NICS = re.compile(r"NET/OFI Selected [Pp]rovider is [\w-]+.*?\(found (\d+) nics?\)")
_IB_USING = re.compile(r"NET/IB : Using ((?:\[\d+\]\S+\s*)+)")
_IB_DEVICE = re.compile(r"\[\d+\]\S+")


def parse_rails(text: str) -> Optional[int]:
    """How many fabric NICs this process's NCCL found (the last report wins), or None when the
    log does not say (sockets, TCPX, or a log without the network's init lines)."""
    counts = []
    for line in text.splitlines():
        ofi = _OFI_NICS.search(line)
        if ofi:
            counts.append(int(ofi.group(1)))
        ib = _IB_USING.search(line)
        if ib:
            counts.append(len(_IB_DEVICE.findall(ib.group(1))))
    return counts[-1] if counts else None


# NCCL's banner, "NCCL INFO NCCL version 2.19.4+cuda12.2" (init.cc showVersion): written by the
# process that is rank 0 of a communicator, so not by every rank.
_NCCL_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")


def parse_nccl_version(text: str) -> Optional[str]:
    """The NCCL version ("2.19.4") an NCCL INFO log names (the last one), or None."""
    found = _NCCL_VERSION.findall(text)
    return found[-1] if found else None


def loaded_nccl_version(maps: str = "/proc/self/maps") -> Optional[str]:
    """The version of the libnccl this process has loaded, asked of that library itself
    (ncclGetVersion), or None when none is loaded. Not torch.cuda.nccl.version(): that is the
    version torch was compiled against (torch/csrc/cuda/nccl.cpp, NCCL_MAJOR/MINOR/PATCH), not
    the one a preload or the loader picked."""
    try:
        with open(maps) as fh:
            paths = [line.split()[-1] for line in fh if "libnccl.so" in line]
    except OSError:
        return None
    if not paths:
        return None
    import ctypes  # only where a library is loaded: dlopen returns the loaded one

    code = ctypes.c_int()
    try:
        if ctypes.CDLL(paths[0]).ncclGetVersion(ctypes.byref(code)) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return nccl_version_from_code(code.value)


def nccl_version_from_code(code: int) -> str:
    """ncclGetVersion's integer as "major.minor.patch": major*10000 + minor*100 + patch from
    NCCL 2.9 on, major*1000 + minor*100 + patch before (nccl.h NCCL_VERSION)."""
    if code >= 20900:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def _unique(items: Iterable[str]) -> List[str]:
    return list(dict.fromkeys(items))


# --- NCCL logging: on before the communicator exists, read back after the test ---

_echo_whole_log = False  # set by prepare_nccl_logging: the user asked for NCCL's INFO lines


def prepare_nccl_logging(environ: "os._Environ[str] | Dict[str, str]" = os.environ) -> str:
    """Make NCCL write its INIT/NET INFO lines to a per-process file; returns the file pattern.

    Must run before the NCCL communicator is created (NCCL reads these once per process). A
    user's NCCL_DEBUG of INFO or TRACE (and its subsystems) and NCCL_DEBUG_FILE are kept; the
    gate then repeats what NCCL wrote so far on stdout, as NCCL would have printed it. A quieter
    level (the cluster contract sets WARN to keep pod logs readable) is raised to INFO but sent
    to the file, and the gate repeats only the WARN lines, so the pod log stays as quiet.
    """
    global _echo_whole_log
    _echo_whole_log = environ.get("NCCL_DEBUG", "").upper() in ("INFO", "TRACE")
    if not _echo_whole_log:
        environ["NCCL_DEBUG"] = "INFO"
        environ["NCCL_DEBUG_SUBSYS"] = "INIT,NET"
    elif "NCCL_DEBUG_FILE" in environ:
        _echo_whole_log = False  # the user reads their own file
    environ.setdefault("NCCL_DEBUG_FILE", os.path.join(tempfile.gettempdir(), NCCL_LOG_NAME))
    return environ["NCCL_DEBUG_FILE"]


def read_nccl_log(pattern: Optional[str], pid: Optional[int] = None) -> str:
    """This process's NCCL log text ("" when there is none): %h may be shortened by NCCL, so
    match any host, and this pid."""
    if not pattern:
        return ""
    expanded = pattern.replace("%h", "*").replace("%p", str(pid or os.getpid()))
    text = []
    for path in sorted(glob.glob(expanded)):
        with open(path, errors="replace") as fh:
            text.append(fh.read())
    return "".join(text)


# --- measuring ---

@dataclass
class RankFigures:
    """What one rank measured; gathered to every rank so that all decide alike."""

    rank: int
    host: str
    transport: Optional[str]
    compute_s: float
    all_reduce_s: List[float]  # per message size, mean seconds per call on this rank
    all_to_all_s: List[float]
    local_problems: List[str] = field(default_factory=list)  # this node's RDMA set-up
    rails: Optional[int] = None  # fabric NICs this rank's NCCL found (None: its log says not)
    node: str = ""  # the Kubernetes node (env NODE_NAME from spec.nodeName; else the host)
    gpu_problems: List[str] = field(default_factory=list)  # trainer/gpu_health.py
    matmul_tflops: Optional[float] = None  # this rank's BF16 matmul throughput (GPU only)
    nccl_version: Optional[str] = None  # the NCCL this rank loaded (None: unknown, e.g. gloo)


SYSFS_INFINIBAND = "/sys/class/infiniband"
RDMA_TRANSPORTS = ("ib", "efa")
# RDMA registers (pins) NCCL's buffers; a few GiB per rank are registered on 8-GPU nodes, so a
# limit below this fails registration (AKS gives containers 64 KiB, workloads/pod.py raises it).
MIN_LOCKED_MEMORY = 1 << 30
# NCCL's IB transport leaves out ports that are not ACTIVE when it starts (NVIDIA/nccl
# src/transport/net_ib/init.cc, IBV_PORT_ACTIVE): on a node that has just booted, a port still
# training its link would cost a rail, so every rank waits this long for it before NCCL starts.
PORT_ACTIVE_WAIT_SECONDS = 60.0
PORT_POLL_SECONDS = 2.0


def _port_state(port_dir: str) -> str:
    """sysfs' "4: ACTIVE" -> "ACTIVE"."""
    with open(os.path.join(port_dir, "state")) as fh:
        return fh.read().strip().split(":")[-1].strip()


def rdma_problems(expected_transport: str, environ: Mapping[str, str] = os.environ,
                  sysfs: str = SYSFS_INFINIBAND, wait_seconds: float = PORT_ACTIVE_WAIT_SECONDS,
                  sleep: Callable[[float], None] = time.sleep) -> List[str]:
    """What on this node would make an RDMA fabric fail or run on fewer rails, checked before
    NCCL starts: the locked-memory limit, and for an exact NCCL_IB_HCA list ("=dev:port,...")
    that every named port exists, is InfiniBand (device names follow probe order on AKS, and an
    Ethernet VF in the list would silently drop a rail) and is ACTIVE within `wait_seconds`."""
    if expected_transport not in RDMA_TRANSPORTS:
        return []
    problems = []
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if soft != resource.RLIM_INFINITY and soft < MIN_LOCKED_MEMORY:
        problems.append(f"locked-memory limit {soft} bytes is too small for RDMA "
                        f"(need {MIN_LOCKED_MEMORY} or unlimited)")
    hcas = environ.get("NCCL_IB_HCA", "")
    if expected_transport == "ib" and hcas.startswith("=") and not hcas.startswith("=="):
        for entry in filter(None, hcas[1:].split(",")):
            device, _, port = entry.partition(":")
            path = os.path.join(sysfs, device, "ports", port or "1", "link_layer")
            try:
                with open(path) as fh:
                    layer = fh.read().strip()
            except OSError:
                problems.append(f"NCCL_IB_HCA names {entry}, which this node does not have")
                continue
            if layer != "InfiniBand":
                problems.append(f"NCCL_IB_HCA names {entry}, whose link layer is {layer}, "
                                "not InfiniBand")
                continue
            port_dir = os.path.dirname(path)
            waited = 0.0
            while (state := _port_state(port_dir)) != "ACTIVE" and waited < wait_seconds:
                sleep(PORT_POLL_SECONDS)
                waited += PORT_POLL_SECONDS
            if state != "ACTIVE":
                problems.append(f"NCCL_IB_HCA port {entry} is {state}, not ACTIVE, after "
                                f"{wait_seconds:g} s")
    return problems


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(op: Callable[[], object], device: torch.device, nbytes: int) -> float:
    """Mean seconds per call after a warm-up; ranks start together (the warm-up collectives
    line them up), so the slowest rank's figure is the collective's time, as in nccl-tests."""
    if device.type == "cuda":
        warmup, timed = GPU_ITERS[nbytes >= LARGE_MESSAGE]
    else:
        warmup, timed = CPU_ITERS
    for _ in range(warmup):
        op()
    _sync(device)
    start = time.perf_counter()
    for _ in range(timed):
        op()
    _sync(device)
    return (time.perf_counter() - start) / timed


MATMULS = 10


def matmul_size(device: torch.device) -> int:
    return 8192 if device.type == "cuda" else 384


def matmul_tflops(device: torch.device, seconds: float) -> Optional[float]:
    """The BF16 throughput of time_compute's load on a GPU (None on CPU: no floor there)."""
    if device.type != "cuda" or seconds <= 0:
        return None
    return MATMULS * 2 * matmul_size(device) ** 3 / seconds / 1e12


def injected_compute_seconds(rank: int) -> Optional[float]:
    """The compute time a test injects for this rank (TEST_DELAY_ENV), or None: measure."""
    delayed = os.environ.get(TEST_DELAY_ENV)
    if delayed is None:
        return None
    return TEST_COMPUTE_SECONDS + (TEST_DELAY_SECONDS if delayed == str(rank) else 0.0)


def time_compute(device: torch.device, rank: int) -> float:
    """This rank's time for a fixed matmul load: a slow or throttled GPU shows here, while in a
    collective every rank waits for the slowest and they all look alike."""
    injected = injected_compute_seconds(rank)
    if injected is not None:
        return injected
    size = matmul_size(device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    a = torch.randn(size, size, device=device, dtype=dtype)
    (a @ a).sum().item()  # warm-up: kernel selection, allocator
    _sync(device)
    start = time.perf_counter()
    for _ in range(MATMULS):
        a = (a @ a) * size ** -0.5  # rescaled: entries stay near 1, no overflow or denormals
    _sync(device)
    return time.perf_counter() - start


def time_collectives(sizes: Sequence[int], world_size: int, device: torch.device
                     ) -> tuple[List[float], List[float]]:
    """Seconds per all_reduce and per all_to_all of each size (float32, split evenly)."""
    all_reduce_s, all_to_all_s = [], []
    for size in sizes:
        count = max(world_size, size // 4 // world_size * world_size)  # all_to_all splits evenly
        send = torch.ones(count, device=device)
        recv = torch.empty_like(send)
        all_reduce_s.append(_timed(lambda: dist.all_reduce(send), device, size))
        all_to_all_s.append(_timed(lambda: dist.all_to_all_single(recv, send), device, size))
        del send, recv  # an 8 GiB pair must be gone before the next size or the model
    return all_reduce_s, all_to_all_s


# --- deciding ---

@dataclass
class GateResult:
    """The gate's verdict and figures (the same on every rank)."""

    mode: str
    passed: bool
    transport: str
    expected_transport: str
    floor_gbps: float
    sizes: List[int]
    all_reduce_busbw_gbps: List[Optional[float]]
    all_to_all_busbw_gbps: List[Optional[float]]
    world_size: int
    slowest_rank: int
    slowest_host: str
    slowest_ratio: float  # slowest rank's compute time / median of the other ranks'
    seconds: float = 0.0
    problems: List[str] = field(default_factory=list)
    fewest_rails: Optional[int] = None  # fabric NICs on the rank whose NCCL found the fewest
    expected_rails: int = 0
    all_to_all_floor_gbps: float = 0.0
    # Nodes a problem of their own was found on (GPU, transport, NICs, RDMA, a slow rank);
    # empty when every problem is the fabric's (bandwidth under a floor).
    bad_nodes: List[str] = field(default_factory=list)
    attempts: int = 1
    exit_status: int = 0  # 0 (go on), NODE_LEFT_OUT or FABRIC_ERROR; set by run_fabric_gate
    left_out: List[str] = field(default_factory=list)  # nodes tainted by this run
    expected_nccl_version: str = ""  # the NCCL every rank must have loaded (torch's own)
    nccl_versions: List[str] = field(default_factory=list)  # what the ranks loaded
    nodes: List[str] = field(default_factory=list)  # every node of the gang, in rank order
    measured: bool = True  # False: stopped on the NCCL check, before any collective

    def line(self) -> str:
        """The one log line, pass or fail."""
        if not self.problems:
            status = "passed"
        elif self.passed:
            status = "WARNING (report only, not enforced)"
        elif self.exit_status == NODE_LEFT_OUT:
            status = (f"FAILED, left out node{'s' * (len(self.left_out) > 1)} "
                      f"{', '.join(self.left_out)} (exit {NODE_LEFT_OUT}: "
                      "the gang restarts on other nodes, not counted)")
        else:
            status = f"FAILED (exit {FABRIC_ERROR}, no retry)"
        bw = self.all_reduce_busbw_gbps[-1] if self.all_reduce_busbw_gbps else None
        a2a = self.all_to_all_busbw_gbps[-1] if self.all_to_all_busbw_gbps else None
        floor = f"floor {self.floor_gbps:g} GB/s" if self.floor_gbps else "no floor"
        a2a_floor = (f"floor {self.all_to_all_floor_gbps:g} GB/s" if self.all_to_all_floor_gbps
                     else "no floor")
        nics = "" if self.fewest_rails is None else (
            f", {self.fewest_rails} fabric NICs" + (f" of {self.expected_rails}"
                                                     if self.expected_rails else ""))
        size = _size(self.sizes[-1]) if self.sizes else "-"
        nccl = (f"; NCCL {'+'.join(self.nccl_versions)}" if self.nccl_versions else "") + (
            f" (expected {self.expected_nccl_version})" if self.expected_nccl_version else "")
        if not self.measured:
            return (f"fabric gate {status}{nccl}, checked before any collective; "
                    f"{self.world_size} ranks; problems: {'; '.join(self.problems)}")
        text = (f"fabric gate {status}: transport {self.transport} (expected "
                f"{self.expected_transport or 'any'}{nics}){nccl}; all_reduce busbw {_gbps(bw)} at "
                f"{size} ({floor}); all_to_all busbw {_gbps(a2a)} ({a2a_floor}); slowest rank "
                f"{self.slowest_rank} on {self.slowest_host} "
                f"{self.slowest_ratio:.2f}x the others' median compute time (limit "
                f"{SLOW_RANK_FACTOR:g}x); {self.world_size} ranks, {self.seconds:.1f} s"
                + (f", {self.attempts} attempts" if self.attempts > 1 else ""))
        return text + (f"; problems: {'; '.join(self.problems)}" if self.problems else "")

    def record(self) -> dict:
        """The metrics JSON line (event "fabric_gate")."""
        return {"event": "fabric_gate", **asdict(self)}


def _gbps(value: Optional[float]) -> str:
    return "n/a (one rank)" if value is None else f"{value:.2f} GB/s"


def _size(nbytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def busbw_gbps(nbytes: int, seconds: float, world_size: int, factor: float) -> Optional[float]:
    """nccl-tests' bus bandwidth in GB/s (1e9 bytes); None for a world of one (no traffic)."""
    if world_size < 2 or seconds <= 0:
        return None
    return nbytes / seconds / 1e9 * factor * (world_size - 1) / world_size


def seconds_for_busbw(nbytes: int, busbw: float, world_size: int, factor: float) -> float:
    """The inverse of busbw_gbps: the time per call a published bus bandwidth stands for."""
    return nbytes / (busbw * 1e9) * factor * (world_size - 1) / world_size


def _where(f: RankFigures) -> str:
    return f"rank {f.rank} ({f.node or f.host})"


def decide(figures: Sequence[RankFigures], sizes: Sequence[int], mode: str,
           expected_transport: str, floor_gbps: float, seconds: float = 0.0,
           expected_rails: int = 0, all_to_all_floor_gbps: float = 0.0,
           matmul_floor_tflops: float = 0.0, expected_nccl_version: str = "") -> GateResult:
    """The verdict from every rank's figures: a pure function, so tests can feed it numbers
    (published healthy runs, degraded ones). Problems of one node name it in `bad_nodes`;
    bandwidth under a floor is the fabric's and names none."""
    n = len(figures)
    by_rank = sorted(figures, key=lambda f: f.rank)
    transports = _unique(f.transport or "unknown" for f in by_rank)
    ar = [busbw_gbps(size, max(f.all_reduce_s[i] for f in by_rank), n, 2.0)
          for i, size in enumerate(sizes)]
    a2a = [busbw_gbps(size, max(f.all_to_all_s[i] for f in by_rank), n, 1.0)
           for i, size in enumerate(sizes)]
    slowest = max(by_rank, key=lambda f: f.compute_s)
    others = [f.compute_s for f in by_rank if f.rank != slowest.rank]
    median = statistics.median(others) if others else slowest.compute_s
    ratio = slowest.compute_s / median if median > 0 else 1.0

    problems: List[str] = []
    bad: List[RankFigures] = []
    sick: List[RankFigures] = []  # GPU health: acted on in report mode too (HEALTH_ENFORCED)

    def node_problem(f: RankFigures, text: str, gpu: bool = False) -> None:
        problems.append(f"{_where(f)}: {text}")
        bad.append(f)
        if gpu:
            sick.append(f)

    for f in by_rank:
        for p in f.local_problems:
            node_problem(f, p)
        for p in f.gpu_problems:
            node_problem(f, p, gpu=True)
        if matmul_floor_tflops and f.matmul_tflops is not None \
                and f.matmul_tflops < matmul_floor_tflops:
            node_problem(f, f"GPU matmul {f.matmul_tflops:.0f} TFLOPS is under the floor "
                            f"{matmul_floor_tflops:g} TFLOPS", gpu=True)
    if expected_transport:
        for f in by_rank:
            if f.transport != expected_transport:
                node_problem(f, f"transport {f.transport or 'unknown'} is not "
                                f"{expected_transport}")
    for f in by_rank:
        for p in nccl_problems(f.nccl_version, expected_nccl_version):
            node_problem(f, p)
    if expected_rails:
        for f in by_rank:
            if f.rails is not None and f.rails < expected_rails:
                node_problem(f, f"NCCL found {f.rails} of the node's {expected_rails} fabric NICs")
    if floor_gbps and ar and ar[-1] is not None and ar[-1] < floor_gbps:
        problems.append(f"all_reduce busbw {ar[-1]:.2f} GB/s is under the floor {floor_gbps:g} GB/s")
    if all_to_all_floor_gbps and a2a and a2a[-1] is not None and a2a[-1] < all_to_all_floor_gbps:
        problems.append(f"all_to_all busbw {a2a[-1]:.2f} GB/s is under the floor "
                        f"{all_to_all_floor_gbps:g} GB/s")
    if ratio > SLOW_RANK_FACTOR and slowest.compute_s - median > SLOW_RANK_MIN_SECONDS:
        node_problem(slowest, f"{ratio:.2f}x slower than the others' median")
    enforced = mode == "enforce"
    return GateResult(
        mode=mode, passed=not (problems if enforced else sick), transport="+".join(transports),
        expected_transport=expected_transport, floor_gbps=floor_gbps, sizes=list(sizes),
        all_reduce_busbw_gbps=ar, all_to_all_busbw_gbps=a2a, world_size=n,
        slowest_rank=slowest.rank, slowest_host=slowest.node or slowest.host,
        slowest_ratio=ratio, seconds=seconds, problems=problems, expected_rails=expected_rails,
        fewest_rails=min((f.rails for f in by_rank if f.rails is not None), default=None),
        all_to_all_floor_gbps=all_to_all_floor_gbps,
        bad_nodes=_unique(f.node or f.host for f in (bad if enforced else sick)),
        expected_nccl_version=expected_nccl_version,
        nccl_versions=_unique(f.nccl_version for f in by_rank if f.nccl_version),
        nodes=_unique(f.node or f.host for f in by_rank))


def nccl_problems(loaded: Optional[str], expected: str) -> List[str]:
    """What is wrong with the NCCL one rank loaded ([] when nothing is expected)."""
    if not expected or loaded == expected:
        return []
    return [f"NCCL {loaded or 'unknown'} is loaded, not {expected}, the one this image's torch "
            "was built with and the fabric's plugin runs under"]


@dataclass
class RankNccl:
    """One rank's NCCL, gathered before any collective."""

    rank: int
    node: str
    version: Optional[str]


def decide_nccl(ranks: Sequence[RankNccl], mode: str, expected: str,
                seconds: float = 0.0) -> GateResult:
    """The verdict on the NCCL every rank loaded, before any collective: a rank with another
    NCCL names its node (one lacking a symbol torch calls would end the first such collective
    with a symbol lookup error, which names nothing and counts as a failure)."""
    by_rank = sorted(ranks, key=lambda r: r.rank)
    problems, bad = [], []
    for r in by_rank:
        for p in nccl_problems(r.version, expected):
            problems.append(f"rank {r.rank} ({r.node}): {p}")
            bad.append(r.node)
    return GateResult(
        mode=mode, passed=mode != "enforce" or not problems, transport="not measured",
        expected_transport="", floor_gbps=0.0, sizes=[], all_reduce_busbw_gbps=[],
        all_to_all_busbw_gbps=[], world_size=len(by_rank), slowest_rank=0, slowest_host="",
        slowest_ratio=1.0, seconds=seconds, problems=problems, bad_nodes=_unique(bad),
        expected_nccl_version=expected,
        nccl_versions=_unique(r.version for r in by_rank if r.version),
        nodes=_unique(r.node for r in by_rank), measured=False)


# --- the gate ---

def _injected_log() -> Optional[str]:
    injected = os.environ.get(TEST_NCCL_LOG_ENV)
    if not injected:
        return None
    with open(injected, errors="replace") as fh:
        return fh.read()


def this_rank_nccl_version(device: torch.device) -> Optional[str]:
    """The NCCL this process loaded, before any collective: torch's CUDA build links
    libnccl.so.2 (DT_NEEDED of libtorch_cuda), so it is loaded with torch and can be asked
    (ncclGetVersion) before the first communicator. None on CPU unless a test supplies a log."""
    text = _injected_log()
    if text is not None:
        return parse_nccl_version(text)
    return loaded_nccl_version() if device.type == "cuda" else None


def this_rank_network(device: torch.device
                      ) -> Tuple[Optional[str], Optional[int], Optional[str]]:
    """The transport, fabric NIC count and NCCL version of this process ("gloo", None, None on
    CPU, unless a test supplies a log): the first two from its NCCL log, the version from the
    library it loaded, else from the log (which only a communicator's rank 0 writes it in)."""
    text = _injected_log()
    if text is not None:
        return parse_transport(text), parse_rails(text), parse_nccl_version(text)
    if device.type != "cuda":
        return "gloo", None, None
    text = read_nccl_log(os.environ.get("NCCL_DEBUG_FILE"))
    for line in text.splitlines():  # what the pod log would have shown (prepare_nccl_logging)
        if _echo_whole_log:
            print(line, flush=True)
        elif " NCCL WARN " in line:
            print(line, file=sys.stderr, flush=True)
    return (parse_transport(text), parse_rails(text),
            loaded_nccl_version() or parse_nccl_version(text))


def _measure(cfg: "TrainConfig", ctx: "DistContext", sizes: Sequence[int],
             node_problems: List[str], gpu: List[str], start: float, attempt: int
             ) -> GateResult:
    """One measurement on every rank and the verdict from every rank's figures."""
    compute_s = time_compute(ctx.device, ctx.rank)
    all_reduce_s, all_to_all_s = time_collectives(sizes, ctx.world_size, ctx.device)
    transport, rails, nccl_version = this_rank_network(ctx.device)
    mine = RankFigures(rank=ctx.rank, host=socket.gethostname(), transport=transport,
                       rails=rails, nccl_version=nccl_version, compute_s=compute_s,
                       all_reduce_s=all_reduce_s, all_to_all_s=all_to_all_s,
                       # once per node: every local rank shares its devices and limits
                       local_problems=node_problems if ctx.local_rank == 0 else [],
                       node=os.environ.get(NODE_NAME_ENV, ""), gpu_problems=gpu,
                       matmul_tflops=matmul_tflops(ctx.device, compute_s))
    gathered: List[Optional[RankFigures]] = [None] * ctx.world_size
    dist.all_gather_object(gathered, mine, group=ctx.control_group)  # gloo: no GPU sync needed
    result = decide([f for f in gathered if f is not None], sizes, cfg.fabric_gate,
                    cfg.fabric_transport, cfg.fabric_floor_gbps, time.perf_counter() - start,
                    expected_rails=cfg.fabric_rails,
                    all_to_all_floor_gbps=cfg.fabric_all_to_all_floor_gbps,
                    matmul_floor_tflops=cfg.gpu_matmul_floor_tflops,
                    expected_nccl_version=cfg.fabric_nccl_version)
    result.attempts = attempt
    return result


def nodes_to_leave_out(result: GateResult) -> List[str]:
    """The nodes a failed verdict leaves out: those a problem of their own names, else (the
    bandwidth under a floor, which names none) every node of the gang. A degraded link lowers
    every rank's figure alike, so on 2 nodes the bad one cannot be told apart; fresh nodes
    heal it without a human, and the bound (--fabric_max_nodes_left_out, taints already on
    nodes counted) stops a fabric that is slow everywhere from draining the pool."""
    return list(result.bad_nodes or result.nodes)


def _leave_out(cfg: "TrainConfig", result: GateResult) -> Tuple[int, List[str], Optional[str]]:
    """Rank 0's action on a failed verdict: (exit status, nodes tainted, why not left out)."""
    nodes = nodes_to_leave_out(result)
    if not nodes:
        return FABRIC_ERROR, [], "no node to leave out"
    api = KubeApi.from_environment()
    if api is None:
        return FABRIC_ERROR, [], "no Kubernetes API access to leave the node out"
    try:
        tainted, refused = leave_out(api, nodes, cfg.fabric_max_nodes_left_out)
    except KubeApiError as err:
        return FABRIC_ERROR, [], f"could not taint the node: {err}"
    if refused:
        return FABRIC_ERROR, [], refused
    return NODE_LEFT_OUT, tainted or nodes, None


def _check_nccl(cfg: "TrainConfig", ctx: "DistContext", start: float) -> GateResult:
    """Every rank's loaded NCCL, gathered over the gloo control group: no NCCL call yet."""
    mine = RankNccl(rank=ctx.rank, version=this_rank_nccl_version(ctx.device),
                    node=os.environ.get(NODE_NAME_ENV, "") or socket.gethostname())
    gathered: List[Optional[RankNccl]] = [None] * ctx.world_size
    dist.all_gather_object(gathered, mine, group=ctx.control_group)
    return decide_nccl([r for r in gathered if r is not None], cfg.fabric_gate,
                       cfg.fabric_nccl_version, time.perf_counter() - start)


def run_fabric_gate(cfg: "TrainConfig", ctx: "DistContext") -> GateResult:
    """Measure on every rank, retry once, decide alike everywhere, leave a bad node out, print,
    record. Collective: every rank must call it. The caller exits with result.exit_status
    when the result has not passed."""
    start = time.perf_counter()
    sizes = list(cfg.fabric_gate_sizes or (GPU_SIZES if ctx.device.type == "cuda" else CPU_SIZES))
    # First, with no collective yet: a wrong NCCL would crash the first one (no verdict, no retry:
    # the library does not change).
    result = _check_nccl(cfg, ctx, start) if cfg.fabric_nccl_version else None
    if result is None or result.passed:
        # Before NCCL's first communicator, on every rank: NCCL picks its IB ports when it starts.
        node_problems = rdma_problems(cfg.fabric_transport)
        gpu = gpu_problems(ctx.device.type, ctx.local_rank)
        if os.environ.get(TEST_SICK_GPU_ENV) == str(ctx.rank):
            gpu = [*gpu, TEST_SICK_GPU_PROBLEM]
        result = _measure(cfg, ctx, sizes, node_problems, gpu, start, attempt=1)
        if not result.passed:  # one noisy run must not cost a node or the job
            if ctx.rank == 0:
                log.warning("fabric gate: %s; measuring once more", "; ".join(result.problems))
            result = _measure(cfg, ctx, sizes, node_problems, gpu, start, attempt=2)
    if not result.passed:
        outcome: List[object] = [None]
        if ctx.rank == 0:  # one writer to the API; every rank then exits alike
            outcome[0] = _leave_out(cfg, result)
        dist.broadcast_object_list(outcome, src=0, group=ctx.control_group)
        status, left_out, why_not = outcome[0]  # type: ignore[misc]
        result.exit_status, result.left_out = status, left_out
        if why_not:
            result.problems.append(f"not left out: {why_not}")
        if status == FABRIC_ERROR and cfg.fabric_gate != "enforce":
            # report mode leaves a sick GPU's node out where it can, never fails the job
            # (a workstation's throttled GPU, a pod without the gate's API access)
            result.passed, result.exit_status = True, 0
        if not result.passed and ctx.local_rank == 0:  # one line in every node's (pod's) log
            log.error(result.line())
    if result.passed and ctx.rank == 0:
        print(result.line(), flush=True)
    if ctx.rank == 0 and cfg.metrics_file:
        _append_record(cfg.metrics_file, result.record())
    return result


def _append_record(metrics_file: str, record: dict) -> None:
    """Add the gate's record to the metrics JSON lines (before the trainer's logger opens it)."""
    from trainer.metrics import open_jsonl

    with open_jsonl(metrics_file) as fh:
        fh.write(json.dumps(record) + "\n")
