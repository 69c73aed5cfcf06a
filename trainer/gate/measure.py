"""Measuring on one rank: its RDMA set-up, its share of a fixed matmul and its collectives' times.

No judgement here (trainer/gate/judge.py) and no action (trainer/gate/act.py): figures only.
"""

from __future__ import annotations

import os
import resource
import time
from typing import Callable, List, Mapping, Optional, Sequence

import torch
import torch.distributed as dist

# Bytes. At 128 MiB every fabric here is still climbing (2x p5: 289 GB/s at 128 MiB, 479 at
# 8 GiB; 2x A3 Mega: 152 and 339): the stack passes the size its floor was published for.
GPU_SIZES = (1 << 20, 128 << 20, 1 << 30)
CPU_SIZES = (64 << 10, 1 << 20)  # gloo on a laptop: the whole gate takes about a second
# nccl-tests runs 5 warm-up and 20 timed iterations; at the plateau each call takes 0.1-1 s, so
# fewer suffice there. (warm-up, timed) for messages below / from LARGE_MESSAGE; CPU: tiny.
LARGE_MESSAGE = 1 << 30
GPU_ITERS = ((5, 20), (2, 5))
CPU_ITERS = (2, 5)
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
