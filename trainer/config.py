"""Typed trainer configuration: one dataclass, its docstrings are the CLI help.

Every check lives here and raises ``ValueError`` naming the flag, the value and what
is allowed, so a bad command line fails before any process group or model exists.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import re
from dataclasses import InitVar, dataclass, field
from typing import Any, List, Optional, Sequence, get_args, get_origin, get_type_hints

from trainer.data.layout import prepared_table_sizes
from trainer.sizing import DATA_PARALLEL_MAX_MB

# Criteo layout: 13 integer (dense) and 26 categorical (sparse) columns.
NUM_DENSE_FEATURES = 13
NUM_SPARSE_FEATURES = 26
CHECKPOINT_SCHEMES = ("file", "memory", "s3", "gs", "gcs", "az", "abfs", "abfss")
# NCCL transports the fabric gate can require (trainer/fabric_gate.py); infra/catalog/machines.py's
# FABRIC_TRANSPORTS maps each machine's interconnect to one of these names.
FABRIC_TRANSPORTS = ("socket", "efa", "ib", "tcpx", "tcpxo")
COMM_PRECISIONS = ("fp32", "fp16", "bf16")


class FlagError(ValueError):
    """A command line the trainer refuses: an unknown flag, a value its type or choices refuse,
    or a combination TrainConfig refuses; the text names each flag, its value and what is
    allowed, one line per flag."""


class ConfigError(ValueError):
    """A flag that cannot work with what it meets at run time (e.g. a checkpoint's global
    batch on this world size): the trainer exits CONFIG_ERROR, no retry can help."""


def _help(text: str, **kwargs: Any) -> Any:
    """A dataclass field whose metadata carries its CLI help (and choices)."""
    return field(metadata={"help": text, **kwargs.pop("meta", {})}, **kwargs)


@dataclass
class TrainConfig:
    """DLRM trainer settings. Sizes follow the TorchRec DLRM example's flag names."""

    # --- model ---
    num_embeddings: int = _help(
        "Rows in every embedding table (ids are hashed into it); ignored when "
        "--num_embeddings_per_feature is given.",
        default=100_000,
    )
    num_embeddings_per_feature: Optional[List[int]] = _help(
        f"Comma separated rows per table, {NUM_SPARSE_FEATURES} values (one per "
        "categorical feature). Default: the sizes in --dataset_path's layout.json where "
        "python -m trainer.prepare made it, else --num_embeddings for every table.",
        default=None,
    )
    embedding_dim: int = _help("Width of every embedding vector.", default=64)
    dense_arch_layer_sizes: List[int] = _help(
        "Comma separated MLP sizes for the dense features; the last must equal "
        "--embedding_dim.",
        default_factory=lambda: [512, 256, 64],
    )
    over_arch_layer_sizes: List[int] = _help(
        "Comma separated MLP sizes above the interaction; the last must be 1.",
        default_factory=lambda: [512, 512, 256, 1],
    )
    interaction: str = _help(
        "Feature interaction: 'dot' (original DLRM) or 'dcn' (DCNv2, the MLPerf variant).",
        default="dot",
        meta={"choices": ("dot", "dcn")},
    )
    dcn_num_layers: int = _help("Cross layers for --interaction dcn.", default=3)
    dcn_low_rank_dim: int = _help("Low-rank width of each DCN cross layer.", default=512)

    # --- sharding and numerics ---
    data_parallel_max_mb: float = _help(
        "Replicate (data-parallel) every table whose fp32 weights are at most this many MB; the "
        "planner places the others table-, row- or table-row-wise. A size rule, not the world "
        "size, decides, so a checkpoint resumes on any world size: keep it the same across "
        "resumes. 0 (the default) = shard every table: on few ranks or CPUs a replicated table "
        "costs an all-reduce of its whole gradient every step; --recipe mlperf sets "
        f"{DATA_PARALLEL_MAX_MB:g}, the split torchrec's planner chooses for its tables.",
        default=0.0)
    embedding_comm_forward_precision: str = _help(
        "Precision of the embeddings' forward all-to-all (torchrec qcomm codecs); MLPerf "
        "DLRM-DCNv2 submissions use fp16.", default="fp32", meta={"choices": COMM_PRECISIONS})
    embedding_comm_backward_precision: str = _help(
        "Precision of the embedding gradients' backward all-to-all; MLPerf DLRM-DCNv2 "
        "submissions use bf16.", default="fp32", meta={"choices": COMM_PRECISIONS})
    tf32: str = _help(
        "'on': TF32 tensor cores for fp32 matmuls and convolutions on GPU (as MLPerf submissions "
        "run); 'off': full fp32.", default="off", meta={"choices": ("off", "on")})
    hbm_gb_per_sec: float = _help(
        "GPU memory bandwidth (GB/s) the sharding planner assumes; the stack sets it from "
        "infra/catalog/gpus.py; 0 = torchrec's default.", default=0.0)
    intra_host_gb_per_sec: float = _help(
        "GPU-to-GPU bandwidth within a node (GB/s, NVLink) the planner assumes; the stack sets "
        "it from infra/catalog/gpus.py; 0 = torchrec's default.", default=0.0)
    inter_host_gb_per_sec: float = _help(
        "Bandwidth between nodes per GPU (GB/s) the planner assumes; the stack sets it from "
        "infra/catalog/machines.py (the machine's network over its GPUs); 0 = torchrec's default.",
        default=0.0)

    # --- optimisation ---
    batch_size: int = _help(
        "Samples per step per rank; global batch = this x world size of the first run, kept "
        "in checkpoints: a resume on M ranks takes global batch / M per rank.", default=512)
    global_batch_size: Optional[int] = _help(
        "Samples per step over all ranks, instead of --batch_size: each rank takes this / the "
        "world size (torchrun's WORLD_SIZE), which must divide it.", default=None)
    learning_rate: float = _help("Peak learning rate for embeddings and dense layers.", default=0.01)
    optimizer: str = _help(
        "Optimizer for both parts: 'adagrad' (row-wise Adagrad fused into the embedding "
        "backward, Adagrad for dense), 'exact_adagrad' (torch.optim.Adagrad in the embedding "
        "backward, which torchrec runs as FBGEMM's EXACT_ADAGRAD: one accumulator per weight, "
        "as MLPerf's reference) or 'sgd'.",
        default="adagrad",
        meta={"choices": ("adagrad", "exact_adagrad", "sgd")},
    )
    lr_warmup_steps: int = _help(
        "Steps of linear warm-up to --learning_rate (trainer/schedule.py: the reference's "
        "LRPolicyScheduler).", default=0)
    lr_decay_start: int = _help(
        "Step at which the quadratic decay starts (used when --lr_decay_steps > 0); must not "
        "come before the end of the warm-up.", default=0)
    lr_decay_steps: int = _help(
        "Steps of quadratic decay from --lr_decay_start; the rate then holds at its last "
        "value (at least 1e-7), as the reference's scheduler does; 0 = no decay.", default=0)
    num_epochs: int = _help("Passes over the training data.", default=1)
    max_steps: Optional[int] = _help(
        "Stop after this many global steps (counted across resumes); default: --num_epochs.",
        default=None,
    )
    seed: int = _help("Seed for weights and synthetic data; same seed, same run.", default=0)
    recipe: str = _help(
        "A published recipe whose hyper-parameters fill every flag not given on the command "
        "line: 'mlperf' = mlcommons' DLRM-DCNv2 reference (trainer/recipe.py, with its "
        "sources); empty = none.", default="", meta={"choices": ("", "mlperf")})

    # --- data ---
    dataset_path: Optional[str] = _help(
        "Criteo data: a TSV file (Kaggle train.txt), a directory of TSV day files (day_0 ...), "
        "of torchrec's preprocessed day_<i>_{dense,sparse,labels}.npy or train_*.npy, or of "
        "MLPerf's multi-hot days (day_<i>_sparse_multi_hot.npz beside the dense and labels "
        ".npy). Default: synthetic data.",
        default=None,
    )
    multi_hot_sizes: Optional[List[int]] = _help(
        f"Comma separated ids per feature, {NUM_SPARSE_FEATURES} values: one-hot data (or "
        "synthetic) made multi-hot on the fly as MLPerf DLRM-DCNv2's reference does (its "
        "seeded lookup tables: the id itself, then the ids its table row holds; "
        "trainer/data/multi_hot.py). MLPerf: "
        "3,2,1,2,6,1,1,1,1,7,3,8,1,6,9,5,1,1,1,12,100,27,10,3,1,1. Not for data that is already "
        "multi-hot (day_<i>_sparse_multi_hot.npz).", default=None)
    multi_hot_distribution_type: str = _help(
        "How the extra multi-hot ids are drawn: 'uniform' over the table or 'pareto' (a=0.25), "
        "as the reference's --multi_hot_distribution_type.", default="uniform",
        meta={"choices": ("uniform", "pareto")})
    data_workers: Optional[int] = _help(
        "Reader processes per rank building the --dataset_path batches ahead, in order (started "
        "from a forkserver, never forked from the trainer); 0 = one thread in the trainer "
        "process; held-out batches come from the same readers. Default: with --multi_hot_sizes "
        "(ids drawn on the fly) the rank's cores less 2, at most 8; 2 for TSV where the rank has "
        "3 or more cores of its own, else 0; 0 for memory-mapped .npy/.npz days (a slice costs less than handing a batch over; make "
        "bench-data). Synthetic data: 0 unless set (one thread draws about 1M samples/s; a GPU "
        "at a large batch needs readers).", default=None)
    synthetic_steps_per_epoch: int = _help(
        "Steps (global batches) in one epoch of synthetic data.", default=1000
    )
    eval_batches: int = _help(
        "Held-out global batches for each evaluation, split over the ranks: the same samples "
        "whatever the world size (0 = no evaluation, -1 = the whole held-out set; synthetic "
        "data: --synthetic_steps_per_epoch / 10 global batches). The set's "
        "last, partial global batch is scored too (padded; the padding is not scored).",
        default=20)

    # --- checkpoints ---
    checkpoint_dir: Optional[str] = _help(
        "Where step-<N>/ checkpoints go: a path (shared file system) or an fsspec URI "
        "(s3://, gs://, az://). The newest complete one is resumed automatically.",
        default=None,
    )
    checkpoint_every: int = _help(
        "Save every N steps (0 = only at the end and on SIGTERM); one due while the previous "
        "save is still being written is skipped, never queued.", default=0
    )
    keep_checkpoints: int = _help("Keep the newest K complete checkpoints.", default=3)
    checkpoint_every_seconds: float = _help(
        "Also save when this many seconds passed since the last save (0 = off); all ranks "
        "agree on the step, within 8 steps of it falling due.", default=0.0)
    save_deadline_seconds: float = _help(
        "Seconds after SIGTERM by which the process must have exited (the launcher derives "
        "it from the cloud's notice; torchrun kills workers 30 s after forwarding SIGTERM). "
        "The SIGTERM save is made only if it can finish in time, else the newest periodic "
        "checkpoint is the resume point.", default=25.0)
    checkpoint_write_mb_per_sec: float = _help(
        "Write throughput (MB/s per rank) assumed for the SIGTERM decision until a save in "
        "this run has been measured.", default=100.0)

    # --- metrics ---
    log_every: int = _help("Steps between metric lines / JSON records.", default=50)
    eval_every: int = _help("Evaluate every N steps (0 = only at the end).", default=0)
    evals_per_epoch: int = _help(
        "Evaluate this many times an epoch instead of --eval_every: every training samples // "
        "(global batch x this) steps, the reference's --validation_freq_within_epoch formula "
        "(MLPerf: 20, every 0.05 epoch); 0 = off.", default=0)
    validation_auroc: Optional[float] = _help(
        "Stop training once a validation AUC reaches this (the reference's --validation_auroc; "
        "MLPerf's target is 0.80275); the run then ends as completed.", default=None)
    metrics_file: Optional[str] = _help("JSON lines metrics file (rank 0 writes).", default=None)
    eval_scores_dir: Optional[str] = _help(
        "Rank 0 writes each evaluation's scored samples here, <split>-step-<N>.npy: float32 "
        "[2, samples], logits then labels, in held-out order (to check or recompute a metric).",
        default=None)
    tensorboard_dir: Optional[str] = _help("TensorBoard log directory (rank 0 writes).", default=None)
    telemetry_dir: str = _help(
        "Rank 0 also copies --metrics_file to <this>/metrics.jsonl and the --tensorboard_dir "
        "event files to <this>/tensorboard/ (a path or an fsspec URI: s3://, gs://, az://), "
        "from a background thread (trainer/telemetry.py), so they can be read away from the "
        "cluster; the stack sets <checkpoint_uri>/telemetry. Empty = off.", default="")
    telemetry_every_seconds: float = _help(
        "Seconds between two copies to --telemetry_dir (only changed files are sent); also "
        "copied after each checkpoint and when the trainer exits.", default=60.0)

    # --- fabric gate ---
    fabric_gate: str = _help(
        "Collective test before training (trainer/fabric_gate.py): 'report' prints transport, "
        "bus bandwidth and the slowest rank, and leaves out a node whose GPU fails the health "
        "check where it has API access (exit 200); 'enforce' also exits 3 (no retry) on a wrong "
        "transport, a bandwidth under the floor or a rank much slower than the others (a bad "
        "node is left out: exit 200, the gang restarts elsewhere); 'off'.",
        default="report",
        meta={"choices": ("off", "report", "enforce")},
    )
    fabric_transport: str = _help(
        "Transport NCCL must use between nodes in enforce mode: one of "
        f"{', '.join(FABRIC_TRANSPORTS)}; empty = any.",
        default="",
        meta={"choices": ("", *FABRIC_TRANSPORTS)},
    )
    fabric_floor_gbps: float = _help(
        "Least all_reduce bus bandwidth (GB/s, nccl-tests' busbw) at the largest gate message "
        "size in enforce mode; 0 = no floor.", default=0.0)
    fabric_all_to_all_floor_gbps: float = _help(
        "Least all_to_all bus bandwidth (GB/s, nccl-tests' busbw) at the largest gate message "
        "size in enforce mode; 0 = no floor.", default=0.0)
    gpu_matmul_floor_tflops: float = _help(
        "Least BF16 matmul throughput (TFLOPS) per GPU in the gate's GPU health check (report "
        "and enforce modes); 0 = no floor. Skipped on CPU.", default=0.0)
    fabric_max_nodes_left_out: int = _help(
        "Most nodes the gate may leave out (taint status-taint.cluster-autoscaler.kubernetes.io/torchrec-cloud-unhealthy) before it fails the "
        "job instead (FABRIC_ERROR): nodes already carrying the taint count. Bandwidth under a "
        "floor names no node: every node of the gang is then left out.", default=2)
    fabric_rails: int = _help(
        "Fabric NICs NCCL must find on every node in enforce mode (EFA interfaces, InfiniBand "
        "HCAs), read from its INFO log; 0 = not checked.", default=0)
    fabric_nccl_version: str = _help(
        "NCCL version (e.g. 2.29.7) every rank must have loaded in enforce mode, checked "
        "before any collective: the one torch was built with, which GKE GPUDirect's plugin "
        "runs under; empty = not checked.",
        default="")
    fabric_gate_sizes: Optional[List[int]] = _help(
        "Comma separated message sizes in bytes for the gate's all_reduce and all_to_all "
        "(default: 1 MiB, 128 MiB, 1 GiB on GPU; 64 KiB, 1 MiB on CPU); floors are judged at "
        "the largest.", default=None)
    # Not a flag (dataclasses.fields leaves an InitVar out): the ranks --global_batch_size is
    # split over, for a check made before torchrun starts them (trainer/local_run.py);
    # None = torchrun's WORLD_SIZE.
    world_size: InitVar[Optional[int]] = None

    def __post_init__(self, world_size: Optional[int] = None) -> None:
        if self.global_batch_size is not None:
            world = world_size or int(os.environ.get("WORLD_SIZE", "1"))
            if self.global_batch_size < 1 or self.global_batch_size % world:
                raise ValueError(f"invalid trainer flags:\n  --global_batch_size="
                                 f"{self.global_batch_size!r}: must be a positive multiple of the "
                                 f"world size ({world} ranks)")
            self.batch_size = self.global_batch_size // world
        if self.num_embeddings_per_feature is None and self.dataset_path is not None:
            self.num_embeddings_per_feature = prepared_table_sizes(self.dataset_path)
        errors = list(self._errors())
        if errors:
            raise ValueError("invalid trainer flags:\n  " + "\n  ".join(errors))

    def _errors(self) -> Sequence[str]:
        out: List[str] = []

        def bad(flag: str, value: object, allowed: str) -> None:
            out.append(f"--{flag}={value!r}: {allowed}")

        for name in ("num_embeddings", "embedding_dim", "batch_size", "num_epochs",
                     "dcn_num_layers", "dcn_low_rank_dim", "synthetic_steps_per_epoch",
                     "keep_checkpoints", "log_every"):
            if getattr(self, name) < 1:
                bad(name, getattr(self, name), "must be a positive integer")
        for name in ("lr_warmup_steps", "lr_decay_start", "lr_decay_steps",
                     "checkpoint_every", "eval_every", "evals_per_epoch", "seed"):
            if getattr(self, name) < 0:
                bad(name, getattr(self, name), "must be >= 0")
        if self.max_steps is not None and self.max_steps < 1:
            bad("max_steps", self.max_steps, "must be a positive integer")
        for name in ("data_parallel_max_mb", "hbm_gb_per_sec", "intra_host_gb_per_sec",
                     "inter_host_gb_per_sec"):
            if not getattr(self, name) >= 0:
                bad(name, getattr(self, name), "must be >= 0")
        if not self.learning_rate > 0:
            bad("learning_rate", self.learning_rate, "must be > 0")
        if self.num_embeddings_per_feature is not None:
            if len(self.num_embeddings_per_feature) != NUM_SPARSE_FEATURES:
                bad("num_embeddings_per_feature", _join(self.num_embeddings_per_feature),
                    f"needs exactly {NUM_SPARSE_FEATURES} comma separated values, got "
                    f"{len(self.num_embeddings_per_feature)}")
            elif min(self.num_embeddings_per_feature) < 1:
                bad("num_embeddings_per_feature", _join(self.num_embeddings_per_feature),
                    "every table needs at least 1 row")
        if self.multi_hot_sizes is not None and (len(self.multi_hot_sizes) != NUM_SPARSE_FEATURES
                                                 or min(self.multi_hot_sizes) < 1):
            bad("multi_hot_sizes", _join(self.multi_hot_sizes),
                f"needs exactly {NUM_SPARSE_FEATURES} comma separated values, each at least 1")
        if self.data_workers is not None and self.data_workers < 0:
            bad("data_workers", str(self.data_workers), "0 (a thread) or more reader processes")
        for name in ("dense_arch_layer_sizes", "over_arch_layer_sizes"):
            sizes = getattr(self, name)
            if not sizes or min(sizes) < 1:
                bad(name, _join(sizes), "needs one or more positive layer sizes")
        if self.dense_arch_layer_sizes and self.dense_arch_layer_sizes[-1] != self.embedding_dim:
            bad("dense_arch_layer_sizes", _join(self.dense_arch_layer_sizes),
                f"the last size must equal --embedding_dim ({self.embedding_dim})")
        if self.over_arch_layer_sizes and self.over_arch_layer_sizes[-1] != 1:
            bad("over_arch_layer_sizes", _join(self.over_arch_layer_sizes),
                "the last size must be 1 (one click logit)")
        if self.eval_batches < -1:
            bad("eval_batches", self.eval_batches, "0 (none), -1 (all) or a number of batches")
        if self.eval_every and self.evals_per_epoch:
            bad("evals_per_epoch", self.evals_per_epoch, "set either it or --eval_every")
        if self.validation_auroc is not None and not 0 < self.validation_auroc <= 1:
            bad("validation_auroc", self.validation_auroc, "an AUC in (0, 1]")
        if self.validation_auroc is not None and not (
                (self.eval_every or self.evals_per_epoch) and self.eval_batches):
            bad("validation_auroc", self.validation_auroc, "needs evaluations during training: "
                "--eval_every or --evals_per_epoch, and --eval_batches not 0")
        if self.lr_decay_steps:  # trainer/schedule.py: what the reference's scheduler accepts
            warm, start, steps = self.lr_warmup_steps, self.lr_decay_start, self.lr_decay_steps
            if start < warm:
                bad("lr_decay_start", start, f"must be >= --lr_warmup_steps ({warm}): the "
                    "reference exits with 'warmup must finish before the decay starts'")
            elif not (warm >= 2 or (start <= 1 < start + steps)):
                bad("lr_decay_start", start, "with --lr_warmup_steps 0 or 1 the decay must "
                    "start at step 0 or 1 and last past it: the reference's scheduler has no "
                    "rate to hold before it")
        for name in ("checkpoint_every", "checkpoint_every_seconds"):
            if getattr(self, name) and not self.checkpoint_dir:
                bad(name, getattr(self, name), "needs --checkpoint_dir")
        if not self.checkpoint_every_seconds >= 0:
            bad("checkpoint_every_seconds", self.checkpoint_every_seconds, "must be >= 0")
        for name in ("save_deadline_seconds", "checkpoint_write_mb_per_sec"):
            if not getattr(self, name) > 0:
                bad(name, getattr(self, name), "must be > 0")
        if self.checkpoint_dir and "://" in self.checkpoint_dir:
            scheme = self.checkpoint_dir.split("://", 1)[0]
            if scheme not in CHECKPOINT_SCHEMES:
                bad("checkpoint_dir", self.checkpoint_dir,
                    f"URI scheme must be one of {', '.join(CHECKPOINT_SCHEMES)} or a plain path")
        for name in ("metrics_file", "tensorboard_dir"):
            value = getattr(self, name)
            if value and "://" in value and not value.startswith("file://"):
                bad(name, value, "must be a path (e.g. on the shared file system): object stores "
                    "cannot append to a file")
        if self.telemetry_dir:
            scheme = self.telemetry_dir.split("://", 1)[0] if "://" in self.telemetry_dir else "file"
            if scheme not in CHECKPOINT_SCHEMES:
                bad("telemetry_dir", self.telemetry_dir,
                    f"URI scheme must be one of {', '.join(CHECKPOINT_SCHEMES)} or a plain path")
            elif not (self.metrics_file or self.tensorboard_dir):
                bad("telemetry_dir", self.telemetry_dir,
                    "copies --metrics_file and --tensorboard_dir: set at least one of them")
        if not self.telemetry_every_seconds > 0:
            bad("telemetry_every_seconds", self.telemetry_every_seconds, "must be > 0")
        if not self.fabric_floor_gbps >= 0:
            bad("fabric_floor_gbps", self.fabric_floor_gbps, "must be >= 0 (0 = no floor)")
        for name in ("fabric_all_to_all_floor_gbps", "gpu_matmul_floor_tflops"):
            if not getattr(self, name) >= 0:
                bad(name, getattr(self, name), "must be >= 0 (0 = no floor)")
        if self.fabric_max_nodes_left_out < 0:
            bad("fabric_max_nodes_left_out", self.fabric_max_nodes_left_out, "must be >= 0")
        if self.fabric_rails < 0:
            bad("fabric_rails", self.fabric_rails, "must be >= 0 (0 = not checked)")
        if self.fabric_nccl_version and not re.fullmatch(r"\d+\.\d+\.\d+",
                                                          self.fabric_nccl_version):
            bad("fabric_nccl_version", self.fabric_nccl_version,
                "must be major.minor.patch, e.g. 2.19.4 (empty = not checked)")
        if self.fabric_gate_sizes is not None and (not self.fabric_gate_sizes
                                                   or min(self.fabric_gate_sizes) < 4):
            bad("fabric_gate_sizes", _join(self.fabric_gate_sizes),
                "needs one or more sizes in bytes, each at least 4 (one float)")
        if self.dataset_path is not None and not os.path.exists(self.dataset_path):
            bad("dataset_path", self.dataset_path, "no such file or directory")
        return out

    @property
    def table_sizes(self) -> List[int]:
        """Rows of each of the 26 tables."""
        return list(self.num_embeddings_per_feature or [self.num_embeddings] * NUM_SPARSE_FEATURES)


def _join(values: Optional[Sequence[int]]) -> str:
    return ",".join(str(v) for v in values or [])


def _int_list(text: str) -> List[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma separated integers, got {text!r}")


def build_parser() -> argparse.ArgumentParser:
    """An argparse parser generated from TrainConfig, so flags and help cannot drift."""
    parser = argparse.ArgumentParser(
        prog="python -m trainer",
        description="TorchRec DLRM trainer (run under torchrun for several processes).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        # A shortened flag (--max_step) is refused, not taken for the one it starts: the
        # stack's check of job.trainerArgs (infra/settings/trainer_flags.py) refuses it too.
        allow_abbrev=False,
    )
    hints = get_type_hints(TrainConfig)
    for f in dataclasses.fields(TrainConfig):
        kind = hints[f.name]
        if get_origin(kind) is not None and type(None) in get_args(kind):  # Optional[X]
            kind = next(a for a in get_args(kind) if a is not type(None))
        convert = _int_list if get_origin(kind) in (list, List) else kind
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        parser.add_argument(
            f"--{f.name}", type=convert, default=default, help=f.metadata["help"],
            choices=f.metadata.get("choices"), metavar=None if "choices" in f.metadata else f.name.upper(),
        )
    return parser


def recipe_defaults(recipe: str, given: set, dataset_path: Optional[str]) -> dict:
    """The recipe's flag values for the flags not ``given`` on the command line. A given
    --batch_size replaces the recipe's global batch; data already multi-hot (MLPerf's
    materialized .npz days) takes no on-the-fly multi-hot flags."""
    from trainer.recipe import RECIPES

    values = {k: v for k, v in RECIPES[recipe].items() if k not in given}
    if "batch_size" in given:
        values.pop("global_batch_size", None)
    if "multi_hot_sizes" not in given and _already_multi_hot(dataset_path):
        values.pop("multi_hot_sizes", None)
        values.pop("multi_hot_distribution_type", None)
    return values


def _already_multi_hot(dataset_path: Optional[str]) -> bool:
    if not dataset_path or not os.path.isdir(dataset_path):
        return False
    from trainer.data.layout import prepared_multi_hot_sizes

    return bool(prepared_multi_hot_sizes(dataset_path)) or any(
        name.endswith("_sparse_multi_hot.npz") for name in os.listdir(dataset_path))


def _given_flags(argv: Sequence[str]) -> set:
    """Field names of the flags on the command line (``--name value`` or ``--name=value``)."""
    return {a[2:].split("=", 1)[0] for a in argv if a.startswith("--")}


def closest_flag(flag: str, names: Sequence[str]) -> Optional[str]:
    """The flag name (no dashes) a misspelt ``flag`` most likely meant: argparse's spelling
    first (``--Max-Steps`` is ``max_steps``), else difflib's nearest at its default cutoff, else
    None. One judge for ``make train`` here and for ``job.trainerArgs``
    (infra/settings/trainer_flags.py)."""
    plain = flag.lstrip("-").replace("-", "_").lower()
    if plain in names:
        return plain
    # 0.75, not difflib's 0.6: a typo is close (learning_rat 0.96, batchsize 0.95); another
    # program's flag sharing a suffix is not (TorchRec dlrm_main's shuffle_batches is 0.67
    # from eval_batches), and a wrong guess reads as an instruction.
    close = difflib.get_close_matches(plain, names, n=1, cutoff=0.75)
    return close[0] if close else None


def _unknown_flags(extra: Sequence[str], parser: argparse.ArgumentParser) -> str:
    """One line per flag argparse did not know, with its value(s) and the likeliest flag."""
    names = [o[2:] for o in parser._option_string_actions if o.startswith("--")]
    groups: List[List[str]] = []
    for arg in extra:  # "--name value ..." groups; a value may start with one dash (-1)
        if arg.startswith("--") or not groups:
            groups.append(arg.split("=", 1))
        else:
            groups[-1].append(arg)
    lines = []
    for flag, *values in groups:
        shown = f"{flag}={' '.join(values)!r}" if values else flag
        if not flag.startswith("--"):
            lines.append(f"{shown}: not a flag; every value follows its --name")
            continue
        close = closest_flag(flag, names)
        hint = f"did you mean --{close}? " if close else ""
        lines.append(f"{shown}: not a trainer flag; {hint}python -m trainer --help lists them")
    return "\n".join(lines)


def config_from_flags(argv: Sequence[str], world_size: Optional[int] = None) -> TrainConfig:
    """The TrainConfig of a trainer command line, or FlagError naming every bad flag; nothing
    printed, nothing exited (--help aside), so a launcher can check flags before it starts
    anything. With --recipe, the recipe's values become the defaults of the flags not given."""
    argv = list(argv)
    parser = build_parser()
    parser.exit_on_error = False  # argparse raises ArgumentError instead of printing usage

    def parse() -> argparse.Namespace:
        try:
            args, extra = parser.parse_known_args(argv)
        except argparse.ArgumentError as err:
            raise FlagError(str(err)) from None
        if extra:
            raise FlagError(_unknown_flags(extra, parser))
        return args

    args = parse()
    if args.recipe:
        parser.set_defaults(**recipe_defaults(args.recipe, _given_flags(argv), args.dataset_path))
        args = parse()
    try:
        return TrainConfig(**vars(args), world_size=world_size)
    except ValueError as err:
        raise FlagError(str(err)) from None


def parse_config(argv: Optional[Sequence[str]] = None) -> TrainConfig:
    """Parse and validate flags; a bad one exits with status 2 and a line naming it (no usage
    text: under torchrun each rank prints it, and the line says where the flags are listed)."""
    import sys

    try:
        return config_from_flags(sys.argv[1:] if argv is None else argv)
    except FlagError as err:
        parser = build_parser()
        parser.exit(2, f"{parser.prog}: error: {err}\n")
