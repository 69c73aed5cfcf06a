"""The whole time-to-train of a planned run, part by part, from figures the advisor already has
(torchrec's plan, the machine catalog, the file system's throughput): pure arithmetic, no
torch, so every part can be tested and printed on its own (torchrec_cloud/plan.py prints it).

Per training step: the embeddings (the planner's estimate for the slowest rank), the dense
layers (FLOPs at the GPU's rated dense throughput, fp32 or TF32, plus the part of the dense
gradients' all-reduce the backward does not hide), and the input read (bytes per sample of the
data form at the file system's read throughput, plus drawing multi-hot ids on the fly on the
rank's reader processes; the loader reads ahead, so only the part above the GPU's step time
adds). Per run: evaluations (forward passes over the validation set and the
exact AUC), checkpoint stalls at the cadence the stack derives (infra/cadence.py), start-up
(the node, MLPerf's multi-hot lookup tables), the final save, preparation and what a spot
preemption costs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# The step's GPU time is the stack's formula too (its run estimate and cadence): one source.
from infra.step_time import (all_reduce_ms, dense_flops_per_sample, dense_step_ms,  # noqa: F401
                             exposed_all_reduce_ms, gpu_step_ms)

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


def input_step_ms(bytes_per_sample: int, global_batch: int, read_mb_s: float) -> float:
    """Every rank reads its slice of the global batch from the one shared file system."""
    return bytes_per_sample * global_batch / (read_mb_s * 1e6) * 1e3


def expand_step_ms(batch_per_rank: int, ms_per_sample: float, readers: int) -> float:
    """Drawing a rank's batch of multi-hot ids on the fly, spread over its reader processes
    (none: the trainer's own thread does it)."""
    return batch_per_rank * ms_per_sample / max(1, readers)


def auc_seconds(samples: int, sort_keys_per_s: float, gather_gb_s: float) -> float:
    """The exact AUC on the GPU: scores and labels (8 bytes a sample) gathered to rank 0 over
    its network share, then one sort and cumulative sums (trainer/metrics.py)."""
    return samples * 8 / (gather_gb_s * 1e9) + samples / sort_keys_per_s


def checkpoint_share(save_seconds: float, stall_seconds: float, interval_seconds: float) -> float:
    """The share of training time checkpoints take: each save stalls training while it stages
    its state to host memory (``stall_seconds``); the write goes on in the background, and a
    save falling due while the previous one is still being written is skipped, never queued
    (trainer/checkpoint.py), so saves are at least one write apart."""
    return stall_seconds / max(interval_seconds, save_seconds)


@dataclass(frozen=True)
class Step:
    """One training step of the slowest rank, in milliseconds."""

    embeddings_ms: float
    dense_ms: float  # forward + backward matmuls at the rated throughput
    all_reduce_ms: float  # the dense gradients' all-reduce
    read_ms: float  # reading the step's samples from the shared file system
    expand_ms: float = 0.0  # drawing its multi-hot ids on the fly (CPU, the rank's readers)
    readers: int = 0  # the rank's reader processes (0: the trainer's own thread)

    @property
    def input_ms(self) -> float:
        """Building the step's input: several readers overlap one's read (a wait on the file
        system) with another's draw (CPU), so the longer of the two; one reader, or the
        trainer's thread, does both in turn."""
        if self.readers >= 2:
            return max(self.read_ms, self.expand_ms)
        return self.read_ms + self.expand_ms

    @property
    def exposed_all_reduce_ms(self) -> float:
        return exposed_all_reduce_ms(self.all_reduce_ms, self.dense_ms)

    @property
    def gpu_ms(self) -> float:
        """infra/step_time.py's formula: the stack's planned steps per second use it too."""
        return gpu_step_ms(self.embeddings_ms, self.dense_ms, self.all_reduce_ms)

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


def prepare_hours(rows: int, training_rows: int, one_hot_bytes: int, read_mb_s: float,
                  write_mb_s: float, multi_hot_rows_per_s: float | None,
                  scan_write_hours: float, permutation_seconds_per_row: float,
                  multi_hot_tables_seconds: float) -> dict[str, float]:
    """The preparation: the scan and write passes (trainer/prepare estimated_hours, given as
    ``scan_write_hours``), the shuffle's permutation of the training rows (drawn in one
    process before any day is gathered), the shuffle itself (every one-hot byte read from the
    days and written again in its new order: bound by the file system), and, for materialized
    multi-hot, MLPerf's lookup tables drawn once and the multi-hot days written at
    ``multi_hot_rows_per_s`` (None: drawn on the fly, at each pod's start instead)."""
    permutation = training_rows * permutation_seconds_per_row / 3600
    shuffle = rows * one_hot_bytes * (1 / (read_mb_s * 1e6) + 1 / (write_mb_s * 1e6)) / 3600
    multi_hot = (multi_hot_tables_seconds / 3600 + rows / multi_hot_rows_per_s / 3600
                 if multi_hot_rows_per_s else 0.0)
    return {"scan and write": scan_write_hours, "permutation": permutation, "shuffle": shuffle,
            "multi-hot": multi_hot}


def multi_hot_tables_seconds(table_rows: list[int], multi_hot_sizes: list[int],
                             ids_per_second: float) -> float:
    """Drawing MLPerf's multi-hot lookup tables (trainer/data/multi_hot.py): ``size - 1`` ids a
    row of each table (about 5.8 billion int32 ids, 23 GB, for MLPerf's sizes), in one process
    on the reference's one random stream."""
    ids = sum(r * max(0, k - 1) for r, k in zip(table_rows, multi_hot_sizes))
    return ids / ids_per_second


def preemption_loss_seconds(interval_seconds: float, start_seconds: float,
                            load_seconds: float) -> float:
    """What one spot preemption costs the run: half a checkpoint interval of work on average,
    a replacement pod's start (its node, and the multi-hot tables where they are drawn on the
    fly) and the checkpoint's load."""
    return interval_seconds / 2 + start_seconds + load_seconds


def steps_per_epoch(global_batch: int) -> int:
    return math.ceil(TRAIN_SAMPLES / global_batch)
