"""Multi-hot ids: MLPerf DLRM-DCNv2's synthetic multi-hot Criteo, read or made on the fly.

MLPerf's reference turns each one-hot id ``x`` of table ``k`` into ``multi_hot_sizes[k]`` ids:
row ``x`` of a lookup table ``[arange(rows), synthetic]`` (mlcommons/training aa344c7,
recommendation_v2/torchrec_dlrm/multi_hot.py, ``Multihot.__make_multi_hot_indices_tables``:
``np.random.seed(0)`` once, then per table in order ``np.random.randint(0, rows, size=(rows,
size - 1))`` or ``np.random.pareto(a=0.25, ...).astype(np.int32) % rows``; ``convert_to_multi_hot``
looks the batch's ids up with ``nn.functional.embedding``). ``MultiHot`` uses exactly those
tables, drawn by trainer/prepare/multi_hot.py's ``make_tables`` (the same stream, in chunks) into
a folder under the temporary directory (``$TMPDIR``), once per node and settings (a file lock
makes the other processes wait, then they memory-map it): the reference keeps a copy in every
rank (about 23 GB of int32 for MLPerf's sizes); here ranks and reader processes of a node share
one through the page cache. tests/trainer/test_recipe.py compares ``expand`` with the
reference's own ``Multihot`` class.

The materialised layout (``day_<i>_sparse_multi_hot.npz``, members ``0.npy`` .. ``25.npy``,
int32 ``[rows, size_k]``, stored uncompressed) is what mlcommons/training
recommendation_v2/torchrec_dlrm/data/multi_hot_criteo.py reads (commit a6921c2, ``load_from_npz``:
it memory-maps each member at its offset in the zip); ``open_npz_members`` does the same.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import struct
import tempfile
import zipfile
from typing import List, Optional, Sequence

import numpy as np

from trainer.config import NUM_SPARSE_FEATURES

DISTRIBUTIONS = ("uniform", "pareto")


def tables_folder(sizes: Sequence[int], rows: Sequence[int], distribution: str,
                  root: Optional[str] = None) -> str:
    """The reference's lookup tables for these settings, drawn once into a shared folder."""
    from trainer.prepare.multi_hot import make_tables

    key = json.dumps([list(sizes), list(rows), distribution]).encode()
    work = os.path.join(root or tempfile.gettempdir(), "torchrec-cloud-multi-hot",
                        hashlib.sha256(key).hexdigest()[:16])
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one process draws; the others then find them done
        return make_tables(work, list(sizes), list(rows), distribution)


class MultiHot:
    """Expands one-hot ids [n, 26] (already within their tables) into 26 arrays [n, size_k]."""

    def __init__(self, sizes: Sequence[int], table_sizes: Sequence[int], distribution: str,
                 root: Optional[str] = None) -> None:
        if distribution not in DISTRIBUTIONS:
            raise ValueError(f"multi-hot distribution {distribution!r}: one of {DISTRIBUTIONS}")
        self.sizes = list(sizes)
        self.rows = [int(r) for r in table_sizes]
        self.distribution = distribution
        folder = tables_folder(self.sizes, self.rows, distribution, root)
        # int32 [rows, size - 1]: the reference's table without its identity column.
        self.tables = [np.load(os.path.join(folder, f"table_{k}.npy"), mmap_mode="r")
                       for k in range(len(self.sizes))]

    def expand(self, ids: np.ndarray) -> List[np.ndarray]:
        out = []
        for k, size in enumerate(self.sizes):
            x = np.asarray(ids[:, k], dtype=np.int64)
            if size == 1:
                out.append(x[:, None])
                continue
            out.append(np.concatenate([x[:, None], self.tables[k][x]], axis=1).astype(np.int32))
        return out


def open_npz_members(path: str) -> List[np.ndarray]:
    """The 26 members of an MLPerf multi-hot ``.npz``, memory-mapped (no copy, no zlib)."""
    members = []
    with zipfile.ZipFile(path) as archive, open(path, "rb") as raw:
        for k in range(NUM_SPARSE_FEATURES):
            info = archive.getinfo(f"{k}.npy")
            if info.compress_type != zipfile.ZIP_STORED:
                raise ValueError(f"{path}: member {k}.npy is compressed; MLPerf's layout stores "
                                 "members uncompressed (np.savez, not savez_compressed)")
            raw.seek(info.header_offset)
            local = struct.unpack("<4s5H3L2H", raw.read(30))  # the zip local file header
            raw.seek(info.header_offset + 30 + local[9] + local[10])
            version = np.lib.format.read_magic(raw)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, fortran, dtype = read_header(raw)
            members.append(np.memmap(path, dtype=dtype, mode="r", shape=shape,
                                     order="F" if fortran else "C", offset=raw.tell()))
    return members
