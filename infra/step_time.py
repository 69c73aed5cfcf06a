"""One training step's GPU time, the one formula behind every steps-per-second figure: the sizing
advisor's (torchrec_cloud/plan.py, torchrec's planner run live) and the stack's run estimate
and derived checkpoint cadence (infra/estimate.py planned_step, infra/cadence.py, with the
planner's figure recorded in trainer/sizing.py PLANNED_FULLEST_RANKS). Before it the two
disagreed 1.5x on MLPerf's 2 x p5.48xlarge (the advisor's 120 steps/s against the stack's 80
from a scaled public run), so `plan` and `check` printed different hours an epoch.

A step of the slowest rank is its embeddings (the planner's fwd + bwd compute and comms of
its shards), the dense layers (FLOPs at the GPU's rated dense throughput, fp32 or TF32) and
the part of the dense gradients' all-reduce the backward does not hide. Pure arithmetic: no
torch, so `make check` runs it.
"""

from __future__ import annotations


def dense_flops_per_sample(forward_macs: int) -> float:
    """Forward and backward: 2 FLOPs per multiply-add, backward about twice the forward."""
    return 3 * 2 * forward_macs


def dense_step_ms(batch_per_rank: int, forward_macs: int, tflops: float) -> float:
    return batch_per_rank * dense_flops_per_sample(forward_macs) / (tflops * 1e12) * 1e3


def all_reduce_ms(parameters: int, ranks: int, gb_s_per_gpu: float) -> float:
    """A ring all-reduce of fp32 gradients: each GPU sends and receives 2 (n-1)/n of them over
    its share of the slowest link (between nodes where there are several)."""
    if ranks < 2:
        return 0.0
    return 2 * (ranks - 1) / ranks * parameters * 4 / (gb_s_per_gpu * 1e9) * 1e3


def exposed_all_reduce_ms(all_reduce: float, dense_ms: float) -> float:
    """DDP overlaps the all-reduce with the backward (two thirds of the dense work)."""
    return max(0.0, all_reduce - dense_ms * 2 / 3)


def gpu_step_ms(embeddings_ms: float, dense_ms: float, all_reduce: float) -> float:
    """The slowest rank's step on its GPU: embeddings, dense layers, the exposed all-reduce."""
    return embeddings_ms + dense_ms + exposed_all_reduce_ms(all_reduce, dense_ms)
