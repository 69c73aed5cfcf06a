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
  ``--fabric_all_to_all_floor_gbps``, judged at the largest size: infra/catalog/gate_floors.py
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

# The gate lives in trainer/gate/, one job a module; these are the names callers import.
from trainer.gate.act import nodes_to_leave_out
from trainer.gate.judge import (SLOW_RANK_FACTOR, SLOW_RANK_MIN_SECONDS, GateResult, RankFigures,
                                RankNccl, busbw_gbps, decide, decide_nccl, nccl_problems,
                                seconds_for_busbw)
from trainer.gate.measure import (CPU_ITERS, CPU_SIZES, GPU_ITERS, GPU_SIZES, LARGE_MESSAGE,
                                  MIN_LOCKED_MEMORY, PORT_ACTIVE_WAIT_SECONDS, TEST_COMPUTE_SECONDS,
                                  TEST_DELAY_ENV, TEST_DELAY_SECONDS, TEST_SICK_GPU_ENV,
                                  TEST_SICK_GPU_PROBLEM, injected_compute_seconds, matmul_tflops,
                                  rdma_problems, time_collectives, time_compute)
from trainer.gate.nccl_log import (NCCL_LOG_NAME, TEST_NCCL_LOG_ENV, loaded_nccl_version,
                                   nccl_version_from_code, parse_nccl_version, parse_rails,
                                   parse_transport, prepare_nccl_logging, read_nccl_log,
                                   this_rank_nccl_version, this_rank_network,
                                   transport_of_network)
from trainer.gate.run import run_fabric_gate

__all__ = [
    "CPU_ITERS",
    "CPU_SIZES",
    "GPU_ITERS",
    "GPU_SIZES",
    "LARGE_MESSAGE",
    "MIN_LOCKED_MEMORY",
    "NCCL_LOG_NAME",
    "PORT_ACTIVE_WAIT_SECONDS",
    "SLOW_RANK_FACTOR",
    "SLOW_RANK_MIN_SECONDS",
    "TEST_COMPUTE_SECONDS",
    "TEST_DELAY_ENV",
    "TEST_DELAY_SECONDS",
    "TEST_NCCL_LOG_ENV",
    "TEST_SICK_GPU_ENV",
    "TEST_SICK_GPU_PROBLEM",
    "GateResult",
    "RankFigures",
    "RankNccl",
    "busbw_gbps",
    "decide",
    "decide_nccl",
    "injected_compute_seconds",
    "loaded_nccl_version",
    "matmul_tflops",
    "nccl_problems",
    "nccl_version_from_code",
    "nodes_to_leave_out",
    "parse_nccl_version",
    "parse_rails",
    "parse_transport",
    "prepare_nccl_logging",
    "rdma_problems",
    "read_nccl_log",
    "run_fabric_gate",
    "seconds_for_busbw",
    "this_rank_nccl_version",
    "this_rank_network",
    "time_collectives",
    "time_compute",
    "transport_of_network",
]
