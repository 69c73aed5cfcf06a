"""The whole time-to-train of a planned run, part by part, from figures the advisor already has
(torchrec's plan, the machine catalog, the file system's throughput): pure arithmetic, no
torch, so every part can be tested and printed on its own (torchrec_cloud/plan.py prints it).

Per training step: the embeddings (the planner's estimate for the slowest rank), the dense
layers (FLOPs at the GPU's rated dense throughput, fp32 or TF32, plus the part of the dense
gradients' all-reduce the backward does not hide), and the input read (bytes per sample of the
data form at the file system's read throughput; the loader reads ahead, so only the part above
the GPU's step time adds). Per run: evaluations (forward passes over the validation set and the
exact AUC), checkpoint stalls at the cadence below, start-up, preparation and what a spot
preemption costs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Criteo 1TB: days 0-22 train (mlcommons/training recommendation_v2/torchrec_dlrm/README.MD,
# TOTAL_TRAINING_SAMPLES); day 23's first half validates (trainer/data/criteo.py: len // 2 +
# len % 2 of its 178,274,637 rows, trainer/prepare/__init__.py).
TRAIN_SAMPLES = 4_195_197_692
VALIDATION_SAMPLES = 89_137_319
# Bytes one sample reads: one-hot days (labels int32, 13 dense float32, 26 ids int32: the
# trainer draws the multi-hot ids on the fly) or materialized multi-hot (labels, dense and
# the .npz's ids, int32; trainer/prepare/README.md "What DIR holds").
ONE_HOT_BYTES = 4 + 13 * 4 + 26 * 4


def materialized_bytes(multi_hot_sizes: list[int]) -> int:
    return 4 + 13 * 4 + 4 * sum(multi_hot_sizes)


# Epochs MLPerf's reference takes to 0.80275 at global batch 65,536: the reference convergence
# points of mlcommons/logging mlperf_logging/rcp_checker/training_5.0.0/rcps_dlrm_dcnv2.json
# ("dlrm_dcnv2_ref_65536", 30 runs, commit 17b4ee5af3397ffe51dcb3ec2187f784f9d1cbbe).
RCP_EPOCHS_65536 = (0.75, 0.8, 0.75, 0.75, 0.8, 0.75, 0.8, 0.9, 0.95, 0.75,
                    0.75, 0.75, 0.85, 0.85, 0.7, 0.75, 0.75, 0.9, 0.85, 0.8,
                    0.7, 0.75, 0.75, 0.75, 0.8, 0.9, 0.75, 0.8, 0.85, 0.8)


def epochs_to_target() -> float:
    """The mean of the reference's 30 runs (0.79 epoch); the slowest took 0.95."""
    return round(sum(RCP_EPOCHS_65536) / len(RCP_EPOCHS_65536), 2)


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


def input_step_ms(bytes_per_sample: int, global_batch: int, read_mb_s: float) -> float:
    """Every rank reads its slice of the global batch from the one shared file system."""
    return bytes_per_sample * global_batch / (read_mb_s * 1e6) * 1e3


def auc_seconds(samples: int, sort_keys_per_s: float, gather_gb_s: float) -> float:
    """The exact AUC on the GPU: scores and labels (8 bytes a sample) gathered to rank 0 over
    its network share, then one sort and cumulative sums (trainer/metrics.py)."""
    return samples * 8 / (gather_gb_s * 1e9) + samples / sort_keys_per_s


def checkpoint_interval_seconds(save_seconds: float) -> float:
    """The advisor's checkpoint cadence: the save (in the background) takes at most half the
    interval, so a save is never queued behind the previous one, and the work a preemption
    loses stays as small as that allows. A stand-in: the stack derives its own cadence
    (issue 30 item 4); a minute at least."""
    return max(60.0, 2 * save_seconds)


def checkpoint_share(save_seconds: float, stall_seconds: float, interval_seconds: float) -> float:
    """The share of training time checkpoints take: each save stalls training while it stages
    its state to host memory (``stall_seconds``), plus whatever part of the background write
    outlasts the interval (the next save waits for it)."""
    return (stall_seconds + max(0.0, save_seconds - interval_seconds)) / interval_seconds


@dataclass(frozen=True)
class Step:
    """One training step of the slowest rank, in milliseconds."""

    embeddings_ms: float
    dense_ms: float  # forward + backward matmuls at the rated throughput
    all_reduce_ms: float  # the dense gradients' all-reduce
    input_ms: float  # reading the step's samples from the shared file system

    @property
    def exposed_all_reduce_ms(self) -> float:
        """DDP overlaps the all-reduce with the backward (two thirds of the dense work)."""
        return max(0.0, self.all_reduce_ms - self.dense_ms * 2 / 3)

    @property
    def gpu_ms(self) -> float:
        return self.embeddings_ms + self.dense_ms + self.exposed_all_reduce_ms

    @property
    def input_extra_ms(self) -> float:
        """The loader reads ahead: input costs only what it takes beyond the GPU's step."""
        return max(0.0, self.input_ms - self.gpu_ms)


@dataclass(frozen=True)
class Epoch:
    """One epoch of training with its evaluations and checkpoints, in seconds."""

    steps: int
    step: Step
    evaluations: int
    evaluation_seconds: float  # one evaluation: its forward passes and AUC
    auc_seconds: float  # the AUC's part of it
    first_validation_read_seconds: float  # the validation days read once, then page-cached
    checkpoint_interval_seconds: float
    checkpoint_save_seconds: float
    checkpoint_stall_seconds: float

    @property
    def gpu_seconds(self) -> float:
        return self.steps * self.step.gpu_ms / 1e3

    @property
    def input_seconds(self) -> float:
        return self.steps * self.step.input_extra_ms / 1e3

    @property
    def eval_seconds(self) -> float:
        return self.evaluations * self.evaluation_seconds + self.first_validation_read_seconds

    @property
    def checkpoint_seconds(self) -> float:
        share = checkpoint_share(self.checkpoint_save_seconds, self.checkpoint_stall_seconds,
                                 self.checkpoint_interval_seconds)
        return (self.gpu_seconds + self.input_seconds) * share

    @property
    def seconds(self) -> float:
        return self.gpu_seconds + self.input_seconds + self.eval_seconds + self.checkpoint_seconds

    @property
    def overhead(self) -> float:
        """Input, evaluation and checkpoints over the GPU-bound time."""
        return self.seconds / self.gpu_seconds - 1


def prepare_hours(rows: int, files: int, workers: int, one_hot_bytes: int, read_mb_s: float,
                  write_mb_s: float, multi_hot_rows_per_s: float | None,
                  scan_write_hours: float) -> dict[str, float]:
    """The preparation: the scan and write passes (trainer/prepare estimated_hours, given as
    ``scan_write_hours``), the shuffle (every one-hot byte read from the days and written again
    in its new order: bound by the file system), and, for materialized multi-hot, the multi-hot
    days written one after the other after the shuffle at ``multi_hot_rows_per_s``."""
    del files, workers  # in scan_write_hours already
    shuffle = rows * one_hot_bytes * (1 / (read_mb_s * 1e6) + 1 / (write_mb_s * 1e6)) / 3600
    multi_hot = rows / multi_hot_rows_per_s / 3600 if multi_hot_rows_per_s else 0.0
    return {"scan and write": scan_write_hours, "shuffle": shuffle, "multi-hot": multi_hot}


def preemption_loss_seconds(interval_seconds: float, node_start_seconds: float,
                            load_seconds: float) -> float:
    """What one spot preemption costs the run: half a checkpoint interval of work on average,
    a replacement node's start and the checkpoint's load."""
    return interval_seconds / 2 + node_start_seconds + load_seconds


def steps_per_epoch(global_batch: int) -> int:
    return math.ceil(TRAIN_SAMPLES / global_batch)
