"""Flags of ``python -m trainer.prepare`` (issue 14's interface) and their checks.

Every bad value raises ``UsageError`` naming the flag, the value and what is allowed;
``__main__`` turns it into exit status 2, as argparse does for its own errors."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import List, Optional, Sequence

from trainer.config import NUM_SPARSE_FEATURES
from trainer.prepare.errors import UsageError, bad_flag
from trainer.prepare.source import parse_days

DATASETS = ("criteo_1tb", "criteo_kaggle")
DISTRIBUTIONS = ("uniform", "pareto")  # MLPerf multi_hot.py's dist_type


@dataclass
class Options:
    source: str
    output: str
    dataset: Optional[str]
    days: Optional[List[int]]
    frequency_threshold: int
    max_ind_range: int
    multi_hot_sizes: Optional[List[int]]
    multi_hot_distribution_type: str
    workers: int
    shuffle_seed: Optional[int] = None  # None: days left in their order
    num_embeddings_per_feature: Optional[List[int]] = None  # None: the vocabulary's, capped
    retries: int = 4
    retry_seconds: float = 120.0


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m trainer.prepare",
                description="Raw Criteo TSV (1TB day_<i>[.gz] or Kaggle train.txt, local or s3:// gs:// az://) "
                            "-> torchrec .npy days with contiguous ids, layout.json last.")
    p.add_argument("--source", required=True, help="Directory or fsspec URI holding the raw TSV files.")
    p.add_argument("--output", required=True, help="Directory for the prepared files (shared file system).")
    p.add_argument("--dataset", help=f"One of {', '.join(DATASETS)}; default: criteo_1tb if day_<i> files "
                                     "are there, else criteo_kaggle.")
    p.add_argument("--days", help="1TB days to prepare, e.g. 0-23 or 0-3,7 (default: every day file found). "
                                  "The last one is the validation/test day.")
    p.add_argument("--frequency_threshold", default="0",
                   help="Ids seen fewer times than this (over all prepared days) share id 1; 0 or 1: none "
                        "(torchrec contiguous_preproc_criteo; MLPerf uses 0).")
    p.add_argument("--max_ind_range", default="0",
                   help="Cap every table at this many rows (ids modulo it; MLPerf: 40000000); 0: no cap.")
    p.add_argument("--num_embeddings_per_feature",
                   help=f"{NUM_SPARSE_FEATURES} comma separated table sizes, the model's (MLPerf: 40000000,39060,"
                        "17295,...): every id is hashed modulo its table's size, as the reference reads them and "
                        "materializes its multi-hot days, and the multi-hot lookup tables are drawn with these "
                        "sizes. Default: each column's distinct ids + 2, capped at --max_ind_range.")
    p.add_argument("--multi_hot_sizes",
                   help=f"{NUM_SPARSE_FEATURES} comma separated ids per feature: also write MLPerf's "
                        "day_<i>_sparse_multi_hot.npz (e.g. 3,2,1,2,6,1,1,1,1,7,3,8,1,6,9,5,1,1,1,12,100,27,10,3,1,1).")
    p.add_argument("--multi_hot_distribution_type", default="uniform",
                   help=f"Synthetic multi-hot ids: {' or '.join(DISTRIBUTIONS)} (MLPerf multi_hot.py).")
    p.add_argument("--shuffle_seed",
                   help="criteo_1tb: shuffle the rows of all days but the last together with this seed, as "
                        "MLPerf's preprocessing step 3 (torchrec BinaryCriteoUtils.shuffle, the reference runs "
                        "it with --random_seed 0: the same files for the same seed); the last day stays as it "
                        "is (validation and test halves). Default: no shuffle.")
    p.add_argument("--workers", default="1", help="Processes, each preparing one day (or column) at a time.")
    p.add_argument("--retries", default="4", help="Attempts after a failure other than a bad flag (each skips "
                                                  "the finished days).")
    p.add_argument("--retry_seconds", default="120",
                   help="Wait before the first retry, doubled for each next one (120: 2, 4, 8, 16 min, "
                        "past the minutes a new cloud role grant can take to apply).")
    return p


def _int(flag: str, text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise bad_flag(flag, text, f"an integer >= {least}") from None
    if value < least:
        raise bad_flag(flag, text, f"an integer >= {least}")
    return value


def parse(argv: Sequence[str]) -> Options:
    args = build_parser().parse_args(argv)
    if args.dataset is not None and args.dataset not in DATASETS:
        raise bad_flag("dataset", args.dataset, f"one of {', '.join(DATASETS)}")
    if args.multi_hot_distribution_type not in DISTRIBUTIONS:
        raise bad_flag("multi_hot_distribution_type", args.multi_hot_distribution_type,
                       f"one of {', '.join(DISTRIBUTIONS)}")
    sizes = _per_feature("multi_hot_sizes", args.multi_hot_sizes, 1)
    tables = _per_feature("num_embeddings_per_feature", args.num_embeddings_per_feature, 1, 2**31 - 1)
    return Options(
        source=args.source.rstrip("/") or "/", output=args.output, dataset=args.dataset,
        days=parse_days(args.days) if args.days is not None else None,
        frequency_threshold=_int("frequency_threshold", args.frequency_threshold, 0),
        max_ind_range=_int("max_ind_range", args.max_ind_range, 0),
        multi_hot_sizes=sizes, multi_hot_distribution_type=args.multi_hot_distribution_type,
        workers=_int("workers", args.workers, 1),
        shuffle_seed=None if args.shuffle_seed is None else _int("shuffle_seed", args.shuffle_seed, 0),
        num_embeddings_per_feature=tables,
        retries=_int("retries", args.retries, 0), retry_seconds=_seconds(args.retry_seconds),
    )


def _per_feature(flag: str, text: Optional[str], least: int, most: Optional[int] = None
                 ) -> Optional[List[int]]:
    """26 comma separated integers in ``[least, most]`` (ids are stored as int32), or None."""
    if text is None:
        return None
    try:
        values = [int(s) for s in text.replace(" ", ",").split(",") if s]
    except ValueError:
        values = []
    if len(values) != NUM_SPARSE_FEATURES or min(values) < least or (most and max(values) > most):
        bound = f" and <= {most}" if most else ""
        raise bad_flag(flag, text, f"{NUM_SPARSE_FEATURES} comma separated integers >= {least}{bound}")
    return values


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise bad_flag("retry_seconds", text, "a number of seconds >= 0")
    return value
