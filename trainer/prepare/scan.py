"""Pass 1, one day: what the later passes need from the whole file before writing any of it.

- the least integer feature of the file: torchrec's dense transform subtracts it
  (torchrec 1.8.0 torchrec/datasets/criteo.py, ``BinaryCriteoUtils.tsv_to_npys``:
  ``dense_np -= dense_np.min() - 2``, the minimum over all rows and all 13 columns), so
  a streamed file needs it first;
- rows and malformed lines;
- per column, distinct ids, their counts and first row (``counts.py``), for the vocabulary.

Saved as ``<work>/scan/<prefix>.npz`` (tmp + rename; its presence means the day is scanned).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import List

import numpy as np

from trainer.config import NUM_SPARSE_FEATURES
from trainer.data.tsv_parse import parse_block
from trainer.prepare import source
from trainer.prepare.counts import Accumulator, Counts, of_column


@dataclass
class DayScan:
    rows: int
    malformed: int
    dense_min: int
    size: int  # the source file's size when scanned
    columns: List[Counts]


def scan_day(raw: source.RawFile) -> DayScan:
    columns = [Accumulator() for _ in range(NUM_SPARSE_FEATURES)]
    rows = malformed = 0
    least = None
    for block in source.blocks(raw.url):
        parsed = parse_block(block)
        malformed += int((~parsed.ok).sum())
        if not len(parsed.labels):
            continue
        block_min = int(parsed.ints.min())
        least = block_min if least is None else min(least, block_min)
        for k in range(NUM_SPARSE_FEATURES):
            columns[k].add(of_column(parsed.ids[:, k], rows))
        rows += len(parsed.labels)
    return DayScan(rows, malformed, 0 if least is None else least, raw.size,
                   [c.result() for c in columns])


def path(work: str, prefix: str) -> str:
    return os.path.join(work, "scan", f"{prefix}.npz")


def save(scan: DayScan, where: str) -> None:
    os.makedirs(os.path.dirname(where), exist_ok=True)
    arrays = {"meta": np.array([scan.rows, scan.malformed, scan.dense_min, scan.size], np.int64)}
    for k, c in enumerate(scan.columns):
        arrays.update({f"ids_{k}": c.ids, f"counts_{k}": c.counts, f"first_{k}": c.first})
    tmp = f"{where}.{os.getpid()}.tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, where)


def load_meta(where: str) -> tuple[int, int, int, int]:
    """(rows, malformed, dense_min, source size) without reading the counts."""
    with np.load(where) as saved:
        rows, malformed, dense_min, size = (int(v) for v in saved["meta"])
    return rows, malformed, dense_min, size


def load_column(where: str, k: int) -> Counts:
    with np.load(where) as saved:
        return Counts(saved[f"ids_{k}"], saved[f"counts_{k}"], saved[f"first_{k}"])


def run(raw: source.RawFile, work: str) -> dict:
    """Scan one day unless its saved scan matches the source file; a task for the pool."""
    where = path(work, raw.prefix)
    start = time.monotonic()
    if os.path.exists(where) and load_meta(where)[3] == raw.size:
        return {"prefix": raw.prefix, "rows": load_meta(where)[0], "skipped": True}
    result = scan_day(raw)
    save(result, where)
    return {"prefix": raw.prefix, "rows": result.rows, "malformed": result.malformed,
            "skipped": False, "seconds": time.monotonic() - start, "peak_rss_mib": peak_rss_mib()}


def peak_rss_mib() -> int:
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024  # Linux: KiB
