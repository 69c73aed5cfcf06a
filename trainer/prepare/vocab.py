"""Pass 2, one column: torchrec's contiguous ids from the days' saved counts.

torchrec 1.8.0 torchrec/datasets/criteo.py, ``BinaryCriteoUtils.sparse_to_contiguous``
(what ``scripts/contiguous_preproc_criteo.py`` and MLPerf's
``recommendation_v2/torchrec_dlrm/scripts/process_Criteo_1TB_Click_Logs_dataset.sh`` step 2
run, mlcommons/training aa344c7): frequencies are counted over all the given days; walking
the days in order and each day's rows in order, an id seen fewer than
``frequency_threshold`` times (only when the threshold is > 1) maps to 1, every other id gets
the next number from 2 on the first time it is seen. Ids of different columns are
numbered separately. torchrec keeps a Python dict per column and all days in memory; here
the same numbering comes from sorting first occurrences (``counts.py``), merged day by day.

``--max_ind_range`` then caps each table as MLPerf does with its 40M tables
(recommendation_v2/torchrec_dlrm/README.MD: ``--num_embeddings_per_feature 40000000,...``,
applied as ``sparse % num_embeddings_per_feature`` when read, e.g. in
scripts/materialize_synthetic_multihot_dataset.py, and torchrec's
``InMemoryBinaryCriteoIterDataPipe(hashes=...)``): id ``% max_ind_range``, table
``min(size, max_ind_range)``; ``--num_embeddings_per_feature`` hashes into the model's own
list instead (MLPerf's). Here the modulo is applied when writing, so every stored id is
below its table's size and ``num_embeddings_per_feature`` holds every id; with
``--shuffle_seed`` the training days are written unhashed and the shuffle hashes them after
its float32 round trip, the reference's order (shuffle.py).

Saved per column: ``<work>/vocab/ids_<k>.npy`` (int64, sorted raw ids) and
``contig_<k>.npy`` (int32, their contiguous ids, before the modulo), memory-mapped by the
write pass, so several workers share one copy through the page cache.
"""

from __future__ import annotations

import os
from typing import List, Optional

import numpy as np

from trainer.prepare import scan
from trainer.prepare.counts import ROW_BITS, Counts, merge

FIRST_ID = 2  # torchrec's running_sum starts at 2
RARE_ID = 1  # torchrec maps infrequent ids to 1


def contiguous(counts: Counts, frequency_threshold: int) -> tuple[np.ndarray, int]:
    """(contiguous id per distinct id, table size = largest id + 1) as torchrec numbers them."""
    keep = counts.counts >= frequency_threshold if frequency_threshold > 1 else np.ones(len(counts.ids), bool)
    kept = np.flatnonzero(keep)
    order = kept[np.argsort(counts.first[kept], kind="stable")]
    ids = np.full(len(counts.ids), RARE_ID, dtype=np.int64)
    ids[order] = FIRST_ID + np.arange(len(order), dtype=np.int64)
    return ids, FIRST_ID + len(order)


def build_column(k: int, scans: List[str], frequency_threshold: int, work: str) -> dict:
    """Merge one column over the days (in the given order) and save its mapping; a pool task."""
    merged = None
    for order, where in enumerate(scans):  # day by day: peak is the running set plus one day
        day = scan.load_column(where, k)
        day = Counts(day.ids, day.counts, (np.int64(order) << ROW_BITS) + day.first)
        merged = day if merged is None else merge([merged, day])
    assert merged is not None
    ids, size = contiguous(merged, frequency_threshold)
    if size >= 2**31:
        raise ValueError(f"column {k}: {size} ids do not fit int32; set --max_ind_range")
    out = os.path.join(work, "vocab")
    os.makedirs(out, exist_ok=True)
    for name, arr in ((f"ids_{k}", merged.ids), (f"contig_{k}", ids.astype(np.int32))):
        tmp = os.path.join(out, f"{name}.{os.getpid()}.tmp.npy")
        np.save(tmp, arr)
        os.replace(tmp, os.path.join(out, f"{name}.npy"))
    return {"column": k, "size": size, "distinct": len(merged.ids), "peak_rss_mib": scan.peak_rss_mib()}


class Mapping:
    """Raw ids -> stored ids for every column, memory-mapped from the vocabulary files."""

    def __init__(self, work: str, columns: int, hashes: Optional[List[int]]) -> None:
        """``hashes``: each column's ids modulo its table's rows (None: contiguous ids as they are)."""
        where = os.path.join(work, "vocab")
        self.ids = [np.load(os.path.join(where, f"ids_{k}.npy"), mmap_mode="r") for k in range(columns)]
        self.contig = [np.load(os.path.join(where, f"contig_{k}.npy"), mmap_mode="r") for k in range(columns)]
        self.hashes = hashes

    def apply(self, raw: np.ndarray) -> np.ndarray:
        """[n, 26] raw ids (all in the vocabulary) -> [n, 26] int32 stored ids."""
        out = np.empty(raw.shape, dtype=np.int32)
        for k in range(raw.shape[1]):
            at = np.searchsorted(self.ids[k], raw[:, k])
            if len(at) and (at.max() >= len(self.ids[k]) or (self.ids[k][at] != raw[:, k]).any()):
                raise RuntimeError(f"column {k}: an id not in the vocabulary; the source changed "
                                   "since the scan (remove <output>/.prepare/scan and rerun)")
            ids = self.contig[k][at]
            out[:, k] = ids % self.hashes[k] if self.hashes else ids
        return out


def table_sizes(sizes: List[int], max_ind_range: int,
                num_embeddings: Optional[List[int]] = None) -> List[int]:
    """Rows of each table: the model's own list when given (MLPerf's ``40000000,39060,...``,
    which the reference hashes every id into: ``sparse % num_embeddings_per_feature``), else
    the vocabulary's sizes capped at ``max_ind_range``. Hashing a contiguous id (below its
    column's size) modulo the capped size is the same as modulo ``max_ind_range``."""
    if num_embeddings:
        return list(num_embeddings)
    return [min(s, max_ind_range) if max_ind_range else s for s in sizes]
