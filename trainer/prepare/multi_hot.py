"""MLPerf DLRM-DCNv2's multi-hot ids, materialised as its script does.

mlcommons/training aa344c7, recommendation_v2/torchrec_dlrm/multi_hot.py, ``Multihot.
__make_multi_hot_indices_tables``: ``np.random.seed(0)`` once, then for each table in order a
``[rows, size]`` lookup table ``[arange(rows), synthetic]`` with ``synthetic =
np.random.randint(0, rows, size=(rows, size - 1))`` (uniform) or
``np.random.pareto(a=0.25, size=(rows, size - 1)).astype(np.int32) % rows`` (pareto), as
int32. scripts/materialize_synthetic_multihot_dataset.py then writes, per day,
``day_<i>_sparse_multi_hot.npz`` with members ``"0"`` .. ``"25"`` = that table's rows at
``sparse[:, j] % num_embeddings_per_feature[j]`` (``nn.functional.embedding``): int32
``[rows, size_j]``, first column the one-hot id, ``np.savez`` (uncompressed).

The reference holds every table in memory (a 40M-row table at size 100 is 16 GB as int32).
Here each table is drawn in chunks (numpy's legacy generator gives the same stream
whatever the chunking; tests/trainer/test_prepare.py checks it against the reference's
whole-table draw) into ``<work>/multi_hot/table_<k>.npy`` (int32 ``[rows, size - 1]``, the
identity column left out), which the day writers memory-map.
"""

from __future__ import annotations

import json
import os
import time
from typing import List

import numpy as np

from trainer.prepare.jsonfile import write_json
from trainer.prepare.npyio import NpyFile, NpzFile
from trainer.prepare.scan import peak_rss_mib

SEED = 0
PARETO_A = 0.25
CHUNK_ROWS = 1 << 16  # x size 100 x 8 bytes: about 50 MB a chunk


def make_tables(work: str, sizes: List[int], table_rows: List[int], distribution: str) -> str:
    """Write the lookup tables (once per sizes/rows/distribution) and return their folder."""
    where = os.path.join(work, "multi_hot")
    settings = {"sizes": sizes, "rows": table_rows, "distribution": distribution, "seed": SEED}
    marker = os.path.join(where, "tables.json")
    if os.path.exists(marker) and json.load(open(marker)) == settings:
        return where
    os.makedirs(where, exist_ok=True)
    if os.path.exists(marker):
        os.remove(marker)
    draws = np.random.RandomState(SEED)  # np.random.seed(0)'s stream, global state untouched
    for k, (rows, size) in enumerate(zip(table_rows, sizes)):
        out = NpyFile(os.path.join(where, f"table_{k}.npy"), np.int32, (rows, size - 1))
        for lo in range(0, rows, CHUNK_ROWS):
            n = min(CHUNK_ROWS, rows - lo)
            if distribution == "uniform":
                part = draws.randint(0, rows, size=(n, size - 1))
            else:
                with np.errstate(invalid="ignore"):  # the reference's int32 cast of huge draws
                    part = draws.pareto(a=PARETO_A, size=(n, size - 1)).astype(np.int32) % rows
            out.array.append(part.astype(np.int32))
        out.close()
        out.commit()
    write_json(marker, settings)
    return where


def write_day_of(prefix: str, tables: str, sizes: List[int], table_rows: List[int]) -> dict:
    """``<prefix>_sparse_multi_hot.npz`` from ``<prefix>_sparse.npy``: a task for the worker
    pool, so the days are written in parallel (the reference's script splits the days over
    its ranks the same way). A worker holds one chunk (``CHUNK_ROWS`` x a table's size, int32
    plus the int64 ids: under 60 MB at size 100); the ids, the tables and the output pages go
    through the page cache, shared by the workers."""
    started = time.monotonic()
    sparse = np.load(f"{prefix}_sparse.npy", mmap_mode="r")
    write_day(f"{prefix}_sparse_multi_hot.npz", sparse, tables, sizes, table_rows)
    return {"prefix": os.path.basename(prefix), "rows": len(sparse),
            "seconds": time.monotonic() - started, "peak_rss_mib": peak_rss_mib()}


def write_day(npz_path: str, sparse: np.ndarray, tables: str, sizes: List[int], table_rows: List[int]) -> None:
    """``day_<i>_sparse_multi_hot.npz`` from the day's stored one-hot ids (memory-mapped)."""
    out = NpzFile(npz_path)
    rows = len(sparse)
    for k, size in enumerate(sizes):
        table = np.load(os.path.join(tables, f"table_{k}.npy"), mmap_mode="r")
        member = out.member(str(k), np.int32, (rows, size))
        for lo in range(0, rows, CHUNK_ROWS):
            ids = (np.asarray(sparse[lo:lo + CHUNK_ROWS, k], dtype=np.int64) % table_rows[k]).astype(np.int32)
            member.append(np.concatenate([ids[:, None], table[ids]], axis=1))
    out.close()
    out.commit()
