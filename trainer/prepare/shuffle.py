"""Pass 4 (``--shuffle_seed``): days 0-22 shuffled together as MLPerf's step 3 does, byte for byte.

The reference (mlcommons/training aa344c7, recommendation_v2/torchrec_dlrm/scripts/
process_Criteo_1TB_Click_Logs_dataset.sh, step 3: ``shuffle_preproc_criteo --random_seed 0``)
runs torchrec 1.8's ``BinaryCriteoUtils.shuffle`` (torchrec/datasets/criteo.py): every day but
the last is loaded into one float32 array ``[rows, 13 + 26 + 1]`` (dense, sparse, label),
``np.random.seed(seed); np.random.shuffle(full_dataset)`` permutes its rows, and the rows are
cut back into days of the original sizes: ``day_<d>_dense.npy`` float32 ``[n, 13]``,
``day_<d>_sparse.npy`` and ``day_<d>_labels.npy`` ``.astype(np.int32)`` of the float32 values
(so a sparse id above 2**24 comes back rounded to float32's precision, as in the reference's
files); the last day is copied untouched (validation and test halves).

That needs the whole set in memory (700 GB for Criteo 1TB). Here only the permutation is held
(uint32, 16.8 GB for 1TB): ``RandomState.shuffle`` draws the same swaps for a 1-D array of row
numbers as for the 2-D array's rows (numpy's Fisher-Yates ``random_interval(i)`` for ``i = n-1
.. 1`` either way), so output row ``i`` is input row ``permutation[i]``. Each output day is then
gathered from the memory-mapped input days in sorted chunks, one day per worker.
tests/trainer/test_prepare_shuffle.py compares the files with torchrec's own function.

Crash-safe: the shuffled days are written beside the inputs (``.shuffled`` suffix) and only
renamed over them once all are written (``written.json``), so a rerun never shuffles a mix of
shuffled and unshuffled days.
"""

from __future__ import annotations

import os
import time
from typing import List, Optional, Tuple

import numpy as np

from trainer.config import NUM_DENSE_FEATURES, NUM_SPARSE_FEATURES
from trainer.prepare.jsonfile import write_json
from trainer.prepare.npyio import NpyFile
from trainer.prepare.shuffle_size import (CHUNK_ROWS, DAY_BYTES_PER_ROW,  # noqa: F401 (re-exported)
                                          GATHER_BYTES_PER_ROW, PERMUTATION_BYTES_PER_ROW,
                                          memory_bytes)

PARTS = ("dense", "sparse", "labels")
SUFFIX = ".shuffled"


def permutation(total: int, seed: int) -> np.ndarray:
    """``np.random.seed(seed); np.random.shuffle(rows)``'s order: output row i = input row p[i]."""
    rows = np.arange(total, dtype=np.uint32 if total < 1 << 32 else np.int64)
    np.random.RandomState(seed).shuffle(rows)
    return rows


def _through_float32(values: np.ndarray) -> np.ndarray:
    """The reference's round trip: stored in its float32 array, saved ``.astype(np.int32)``."""
    return values.astype(np.float32).astype(np.int32)


def hashed(ids: np.ndarray, hashes: Optional[List[int]]) -> np.ndarray:
    """Shuffled ids as the reference's training and materialize script see them: the float32
    round trip first (its step-3 files), then each column modulo its table's rows
    (``sparse % num_embeddings_per_feature`` when read). int32: every table is below 2**31."""
    rounded = _through_float32(ids)
    if not hashes:
        return rounded
    return (rounded % np.asarray(hashes, dtype=np.int64)).astype(np.int32)


def write_day(prefixes: List[str], rows: List[int], day: int, order_path: str,
              hashes: Optional[List[int]] = None) -> dict:
    """Output day ``day``: rows ``[start, start + rows[day])`` of the permuted order, gathered
    from the input days ``prefixes`` (memory-mapped, ids not yet hashed), written as
    ``<prefix>_<part>.npy.shuffled`` with the ids ``hashed``. A task for the worker pool."""
    started = time.monotonic()
    order = np.load(order_path, mmap_mode="r")
    starts = np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)
    inputs = [[np.load(f"{p}_{part}.npy", mmap_mode="r") for part in PARTS] for p in prefixes]
    n, first = rows[day], int(starts[day])
    outs = [NpyFile(f"{prefixes[day]}_{part}.npy{SUFFIX}", dtype, (n, width))
            for part, dtype, width in (("dense", np.float32, NUM_DENSE_FEATURES),
                                       ("sparse", np.int32, NUM_SPARSE_FEATURES),
                                       ("labels", np.int32, 1))]
    for lo in range(0, n, CHUNK_ROWS):
        wanted = np.asarray(order[first + lo:first + min(lo + CHUNK_ROWS, n)], dtype=np.int64)
        gathered = _gather(inputs, starts, wanted)
        outs[0].array.append(gathered[0].astype(np.float32))
        outs[1].array.append(hashed(gathered[1], hashes))
        outs[2].array.append(_through_float32(gathered[2]).reshape(-1, 1))
    for out in outs:
        out.close()
        out.commit()  # complete as <part>.npy.shuffled; renamed over the input once all are
    return {"prefix": os.path.basename(prefixes[day]), "rows": n,
            "seconds": time.monotonic() - started}


def _gather(inputs: List[List[np.ndarray]], starts: np.ndarray,
            wanted: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows ``wanted`` (global input row numbers, any order) of the three parts, read in
    ascending order per input day (mapped pages are read forwards), returned in ``wanted``'s."""
    sort = np.argsort(wanted, kind="stable")
    ordered = wanted[sort]
    day_of = np.searchsorted(starts, ordered, side="right") - 1
    pieces: List[List[np.ndarray]] = [[], [], []]
    for day in np.unique(day_of):
        local = ordered[day_of == day] - starts[day]
        for k in range(3):
            pieces[k].append(np.asarray(inputs[day][k][local]).reshape(len(local), -1))
    back = np.empty_like(sort)
    back[sort] = np.arange(len(sort))
    return tuple(np.concatenate(p)[back] for p in pieces)  # type: ignore[return-value]


def shuffle(work: str, prefixes: List[str], rows: List[int], seed: int, run=None,
            hashes: Optional[List[int]] = None) -> bool:
    """Shuffle the days ``prefixes`` (paths without ``_<part>.npy``; the training days, the last
    day left out by the caller) unless done with these settings, hashing their ids into
    ``hashes`` (each table's rows; None: kept) after the float32 round trip. ``run(fn, calls)``
    spreads the days over workers (trainer/prepare/run.py's Workers.run); default: here, in
    order. Returns whether it shuffled now (False: done before)."""
    folder = os.path.join(work, "shuffle")
    os.makedirs(folder, exist_ok=True)
    settings = {"days": [os.path.basename(p) for p in prefixes], "rows": list(rows), "seed": seed,
                "hashes": list(hashes) if hashes else None}
    done, written = os.path.join(folder, "done.json"), os.path.join(folder, "written.json")
    if _matches(done, settings):
        return False
    if not _matches(written, settings):  # the inputs are still the unshuffled days
        order_path = os.path.join(folder, "permutation.npy")
        np.save(order_path, permutation(sum(rows), seed))
        calls = [(prefixes, list(rows), day, order_path, hashes) for day in range(len(prefixes))]
        for _ in (run or _in_order)(write_day, calls):
            pass
        write_json(written, settings)
        os.remove(order_path)
    for prefix in prefixes:  # every shuffled day exists: replace the inputs
        for part in PARTS:
            if os.path.exists(f"{prefix}_{part}.npy{SUFFIX}"):
                os.replace(f"{prefix}_{part}.npy{SUFFIX}", f"{prefix}_{part}.npy")
    write_json(done, settings)
    os.remove(written)
    return True


def forget(work: str) -> None:
    """A day was rewritten unshuffled: the shuffle must run again."""
    for name in ("done.json", "written.json"):
        path = os.path.join(work, "shuffle", name)
        if os.path.exists(path):
            os.remove(path)


def _matches(path: str, settings: dict) -> bool:
    import json

    try:
        with open(path) as fh:
            return json.load(fh) == settings
    except (OSError, ValueError):
        return False


def _in_order(fn, calls):
    for call in calls:
        yield fn(*call)
