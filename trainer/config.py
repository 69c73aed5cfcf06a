"""Typed trainer configuration: one dataclass, its docstrings are the CLI help.

Every check lives here and raises ``ValueError`` naming the flag, the value and what
is allowed, so a bad command line fails before any process group or model exists.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence, get_args, get_origin, get_type_hints

from trainer.data.layout import prepared_table_sizes

# Criteo layout: 13 integer (dense) and 26 categorical (sparse) columns.
NUM_DENSE_FEATURES = 13
NUM_SPARSE_FEATURES = 26
CHECKPOINT_SCHEMES = ("file", "memory", "s3", "gs", "gcs", "az", "abfs", "abfss")
# NCCL transports the fabric gate can require (trainer/fabric_gate.py); infra/catalog.py's
# FABRIC_TRANSPORTS maps each machine's interconnect to one of these names.
FABRIC_TRANSPORTS = ("socket", "efa", "ib", "tcpx", "tcpxo")


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

    # --- optimisation ---
    batch_size: int = _help(
        "Samples per step per rank; global batch = this x world size of the first run, kept "
        "in checkpoints: a resume on M ranks takes global batch / M per rank.", default=512)
    learning_rate: float = _help("Peak learning rate for embeddings and dense layers.", default=0.01)
    optimizer: str = _help(
        "Optimizer for both parts: 'adagrad' (row-wise Adagrad fused into the embedding "
        "backward, Adagrad for dense) or 'sgd'.",
        default="adagrad",
        meta={"choices": ("adagrad", "sgd")},
    )
    lr_warmup_steps: int = _help("Steps of linear warm-up from 0 to --learning_rate.", default=0)
    lr_decay_start: int = _help("Step at which polynomial decay starts (0 = no decay).", default=0)
    lr_decay_steps: int = _help("Steps over which the rate decays to 0 after --lr_decay_start.", default=0)
    num_epochs: int = _help("Passes over the training data.", default=1)
    max_steps: Optional[int] = _help(
        "Stop after this many global steps (counted across resumes); default: --num_epochs.",
        default=None,
    )
    seed: int = _help("Seed for weights and synthetic data; same seed, same run.", default=0)

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
        "synthetic) made multi-hot on the fly as MLPerf DLRM-DCNv2's reference does (the "
        "feature's own id first, then ids fixed per id; trainer/data/multi_hot.py). MLPerf: "
        "3,2,1,2,6,1,1,1,1,7,3,8,1,6,9,5,1,1,1,12,100,27,10,3,1,1. Not for data that is already "
        "multi-hot (day_<i>_sparse_multi_hot.npz).", default=None)
    multi_hot_distribution_type: str = _help(
        "How the extra multi-hot ids are drawn: 'uniform' over the table or 'pareto' (a=0.25), "
        "as the reference's --multi_hot_distribution_type.", default="uniform",
        meta={"choices": ("uniform", "pareto")})
    data_workers: Optional[int] = _help(
        "Reader processes per rank building the --dataset_path batches ahead, in order (started "
        "from a forkserver, never forked from the trainer); 0 = one thread in the trainer "
        "process. Default: 2 for TSV where the rank has 3 or more cores of its own, else 0; 0 for "
        "memory-mapped .npy/.npz days (a slice costs less than handing a batch over; make "
        "bench-data). Synthetic data: 0 unless set (one thread draws about 1M samples/s; a GPU "
        "at a large batch needs readers).", default=None)
    synthetic_steps_per_epoch: int = _help(
        "Steps (global batches) in one epoch of synthetic data.", default=1000
    )
    eval_batches: int = _help(
        "Held-out global batches for each evaluation, split over the ranks: the same samples "
        "whatever the world size (0 = no evaluation).", default=20)

    # --- checkpoints ---
    checkpoint_dir: Optional[str] = _help(
        "Where step-<N>/ checkpoints go: a path (shared file system) or an fsspec URI "
        "(s3://, gs://, az://). The newest complete one is resumed automatically.",
        default=None,
    )
    checkpoint_every: int = _help(
        "Save every N steps (0 = only at the end and on SIGTERM).", default=0
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
    metrics_file: Optional[str] = _help("JSON lines metrics file (rank 0 writes).", default=None)
    tensorboard_dir: Optional[str] = _help("TensorBoard log directory (rank 0 writes).", default=None)

    # --- fabric gate ---
    fabric_gate: str = _help(
        "Collective test before training (trainer/fabric_gate.py): 'report' prints transport, "
        "bus bandwidth and the slowest rank; 'enforce' also exits 3 (no retry) on a wrong "
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
        "Least BF16 matmul throughput (TFLOPS) per GPU in the gate's GPU health check in "
        "enforce mode; 0 = no floor. Skipped on CPU.", default=0.0)
    fabric_max_nodes_left_out: int = _help(
        "Most nodes the gate may leave out (taint torchrec-cloud/unhealthy) before it fails the "
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

    def __post_init__(self) -> None:
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
                     "checkpoint_every", "eval_every", "eval_batches", "seed"):
            if getattr(self, name) < 0:
                bad(name, getattr(self, name), "must be >= 0")
        if self.max_steps is not None and self.max_steps < 1:
            bad("max_steps", self.max_steps, "must be a positive integer")
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
        if self.lr_decay_start and not self.lr_decay_steps:
            bad("lr_decay_steps", self.lr_decay_steps,
                "must be > 0 when --lr_decay_start is set")
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

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


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


def parse_config(argv: Optional[Sequence[str]] = None) -> TrainConfig:
    """Parse and validate flags; a bad value exits with status 2 and a message naming it."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return TrainConfig(**vars(args))
    except ValueError as err:
        parser.error(str(err))
        raise  # unreachable: parser.error exits
