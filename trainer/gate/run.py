"""The gate itself: measure on every rank (trainer/gate/measure.py, nccl_log.py), gather, judge
(judge.py), retry once, act (act.py), print and record. Collective: every rank calls it.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from typing import TYPE_CHECKING, List, Optional, Sequence

import torch.distributed as dist

from trainer.exit_codes import FABRIC_ERROR
from trainer.gate.act import act_on
from trainer.gate.judge import GateResult, RankFigures, RankNccl, decide, decide_nccl
from trainer.gate.measure import (CPU_SIZES, GPU_SIZES, TEST_SICK_GPU_ENV, TEST_SICK_GPU_PROBLEM,
                                  matmul_tflops, rdma_problems, time_collectives, time_compute)
from trainer.gate.nccl_log import this_rank_nccl_version, this_rank_network
from trainer.gpu_health import gpu_problems
from trainer.node_taint import NODE_NAME_ENV

if TYPE_CHECKING:  # trainer.distributed imports TorchRec
    from trainer.config import TrainConfig
    from trainer.distributed import DistContext

log = logging.getLogger("trainer.fabric_gate")


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
            outcome[0] = act_on(cfg, result)
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
