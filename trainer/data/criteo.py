"""Criteo click logs: the raw TSV format and TorchRec's preprocessed ``.npy`` format.

TSV: ``label \\t 13 integers \\t 26 hex ids`` per line, empty fields allowed (Kaggle
``train.txt`` and the 1TB ``day_<i>`` files). NPY: ``day_<i>_{dense,sparse,labels}.npy``
as written by ``torchrec.datasets.criteo`` (dense already log-transformed).

Each rank reads only its own share (a byte range of every TSV file, a row range of
every npy day), so N ranks on a shared file system read the data once between them.
Ids are hashed into the table sizes. Malformed rows are skipped and counted; the count
is reported in the metrics, and the first few are logged with file and line.

Held-out data: with two or more day files the last one; with a single file every
``HOLDOUT_EVERY``-th row.
"""

from __future__ import annotations

import glob
import logging
import os
import re
from typing import Iterator, List, Optional, Tuple

import numpy as np
from torchrec.datasets.utils import Batch

from trainer.config import NUM_DENSE_FEATURES, NUM_SPARSE_FEATURES
from trainer.data.batch import make_batch

log = logging.getLogger(__name__)

HOLDOUT_EVERY = 10
CHUNK_ROWS = 65536
TSV_COLUMNS = 1 + NUM_DENSE_FEATURES + NUM_SPARSE_FEATURES
Rows = Tuple[np.ndarray, np.ndarray, np.ndarray]  # dense [n,13] f32, sparse [n,26] i64, labels [n]


def _natural_key(path: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", os.path.basename(path))]


def discover(path: str) -> Tuple[str, List[str]]:
    """Return (format, files): 'npy' with day prefixes, or 'tsv' with file paths."""
    if os.path.isfile(path):
        return "tsv", [path]
    dense = sorted(glob.glob(os.path.join(path, "day_*_dense.npy")), key=_natural_key)
    if dense:
        return "npy", [d[: -len("_dense.npy")] for d in dense]
    files = sorted(
        (p for p in glob.glob(os.path.join(path, "*"))
         if os.path.isfile(p) and not p.endswith((".npy", ".md", ".json"))),
        key=_natural_key,
    )
    if not files:
        raise ValueError(f"--dataset_path={path!r}: no Criteo TSV files or day_<i>_*.npy files found")
    return "tsv", files


class CriteoSource:
    """Per-rank batch stream over Criteo files; see the module docstring."""

    def __init__(self, path: str, table_sizes: List[int], batch_size: int, rank: int,
                 world_size: int) -> None:
        self.format, self.files = discover(path)
        self.hashes = np.asarray(table_sizes, dtype=np.int64)
        self.batch_size = batch_size
        self.rank = rank
        self.world_size = world_size
        self.malformed_rows = 0
        self._logged = 0
        if len(self.files) >= 2:
            self._train = (self.files[:-1], None)
            self._eval = (self.files[-1:], None)
        else:
            self._train = (self.files, "train")
            self._eval = (self.files, "eval")

    # --- public stream API (shared with SyntheticSource) ---
    def train_batches(self, epoch: int, start: int) -> Iterator[Batch]:
        del epoch  # one pass per epoch, same order: Criteo is usually trained unshuffled
        return self._batches(*self._train, skip_batches=start)

    def eval_batches(self, count: int) -> Iterator[Batch]:
        for i, batch in enumerate(self._batches(*self._eval, skip_batches=0)):
            if i >= count:
                return
            yield batch

    # --- internals ---
    def _batches(self, files: List[str], holdout: Optional[str], skip_batches: int) -> Iterator[Batch]:
        """Pack valid rows into full batches; the last partial batch is dropped."""
        to_skip = skip_batches * self.batch_size
        parts: List[Rows] = []
        have = 0
        for rows in self._rows(files, holdout):
            if to_skip:
                n = min(to_skip, len(rows[2]))
                to_skip -= n
                rows = tuple(a[n:] for a in rows)  # type: ignore[assignment]
                if not len(rows[2]):
                    continue
            parts.append(rows)
            have += len(rows[2])
            while have >= self.batch_size:
                dense, sparse, labels = (np.concatenate(a) for a in zip(*parts))
                b = self.batch_size
                yield make_batch(dense[:b], sparse[:b] % self.hashes, labels[:b])
                parts = [(dense[b:], sparse[b:], labels[b:])]
                have -= b

    def _rows(self, files: List[str], holdout: Optional[str]) -> Iterator[Rows]:
        for f in files:
            reader = self._npy_rows if self.format == "npy" else self._tsv_rows
            for rows, first_index in reader(f):
                if holdout is not None:
                    keep = (np.arange(first_index, first_index + len(rows[2])) % HOLDOUT_EVERY
                            == HOLDOUT_EVERY - 1)
                    if holdout == "train":
                        keep = ~keep
                    rows = tuple(a[keep] for a in rows)  # type: ignore[assignment]
                if len(rows[2]):
                    yield rows

    def _report(self, where: str, why: str) -> None:
        self.malformed_rows += 1
        if self._logged < 5:
            self._logged += 1
            log.warning("skipping malformed Criteo row at %s: %s", where, why)

    def _tsv_rows(self, path: str) -> Iterator[Tuple[Rows, int]]:
        """This rank's byte range of one TSV file: lines that start inside it."""
        size = os.path.getsize(path)
        start = size * self.rank // self.world_size
        end = size * (self.rank + 1) // self.world_size
        dense = np.zeros((CHUNK_ROWS, NUM_DENSE_FEATURES), dtype=np.float32)
        sparse = np.zeros((CHUNK_ROWS, NUM_SPARSE_FEATURES), dtype=np.int64)
        labels = np.zeros(CHUNK_ROWS, dtype=np.float32)
        n = 0
        index = 0  # line index within this rank's range (for the single-file holdout)
        first = 0
        with open(path, "rb") as fh:
            if start:
                fh.seek(start - 1)
                if fh.read(1) != b"\n":
                    fh.readline()  # finish the line that began in the previous rank's range
            while fh.tell() < end:
                offset = fh.tell()
                line = fh.readline()
                if not line:
                    break
                line_index = index
                index += 1
                try:
                    cols = line.rstrip(b"\r\n").split(b"\t")
                    if len(cols) != TSV_COLUMNS:
                        raise ValueError(f"{len(cols)} columns, expected {TSV_COLUMNS}")
                    label = int(cols[0])
                    if label not in (0, 1):
                        raise ValueError(f"label {cols[0]!r} is not 0 or 1")
                    ints = [int(c) if c else 0 for c in cols[1 : 1 + NUM_DENSE_FEATURES]]
                    cats = [int(c, 16) if c else 0 for c in cols[1 + NUM_DENSE_FEATURES :]]
                except ValueError as err:
                    self._report(f"{path} byte {offset}", str(err))
                    continue
                if n == 0:
                    first = line_index
                labels[n] = label
                dense[n] = np.log1p(np.maximum(ints, 0))
                sparse[n] = cats
                n += 1
                if n == CHUNK_ROWS:
                    yield (dense.copy(), sparse.copy(), labels.copy()), first
                    n = 0
        if n:
            yield (dense[:n].copy(), sparse[:n].copy(), labels[:n].copy()), first

    def _npy_rows(self, prefix: str) -> Iterator[Tuple[Rows, int]]:
        """This rank's contiguous row range of one preprocessed day."""
        dense = np.load(prefix + "_dense.npy", mmap_mode="r")
        sparse = np.load(prefix + "_sparse.npy", mmap_mode="r")
        labels = np.load(prefix + "_labels.npy", mmap_mode="r")
        total = len(labels)
        if len(dense) != total or len(sparse) != total:
            raise ValueError(f"{prefix}_*.npy: dense, sparse and labels have different row counts")
        begin = total * self.rank // self.world_size
        end = total * (self.rank + 1) // self.world_size
        for lo in range(begin, end, CHUNK_ROWS):
            hi = min(lo + CHUNK_ROWS, end)
            d = np.asarray(dense[lo:hi], dtype=np.float32).reshape(hi - lo, -1)
            s = np.asarray(sparse[lo:hi], dtype=np.int64).reshape(hi - lo, -1)
            y = np.asarray(labels[lo:hi]).reshape(-1).astype(np.float32)
            if d.shape[1] != NUM_DENSE_FEATURES or s.shape[1] != NUM_SPARSE_FEATURES:
                raise ValueError(f"{prefix}_*.npy: expected {NUM_DENSE_FEATURES} dense and "
                                 f"{NUM_SPARSE_FEATURES} sparse columns, got {d.shape[1]} and {s.shape[1]}")
            ok = np.isfinite(d).all(axis=1) & (s >= 0).all(axis=1) & ((y == 0) | (y == 1))
            for bad in np.flatnonzero(~ok):
                self._report(f"{prefix} row {lo + bad}", "label not 0/1, non-finite dense or negative id")
            yield (d[ok], s[ok], y[ok]), lo - begin
