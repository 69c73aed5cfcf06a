"""Multi-hot ids: MLPerf DLRM-DCNv2's synthetic multi-hot Criteo, read or made on the fly.

MLPerf's reference turns each one-hot id ``x`` of table ``k`` into ``multi_hot_sizes[k]`` ids:
``x`` itself, then ``size - 1`` ids fixed per ``(k, x)``, uniform in ``[0, rows)`` or
``pareto(a=0.25) % rows`` (facebookresearch/dlrm torchrec_dlrm/multi_hot.py, class Multihot,
``__make_multi_hot_indices_tables``: ``embedding_ids`` concatenated with
``np.random.randint(0, embs_count, ...)`` or ``np.random.pareto(a=0.25, ...) % embs_count``,
one table per feature seeded with its index). The reference keeps a ``rows x size`` table per
feature (16 GB for a 40M-row table at size 100); here the extra ids are a hash of
``(feature, x, j)`` mapped through the same distributions, so nothing is stored and every
rank derives the same ids. The values differ from the reference's tables (different
generator), the distribution and the "first id is the one-hot id" property do not.

The materialised layout (``day_<i>_sparse_multi_hot.npz``, members ``0.npy`` .. ``25.npy``,
int32 ``[rows, size_k]``, stored uncompressed) is what mlcommons/training
recommendation_v2/torchrec_dlrm/data/multi_hot_criteo.py reads (commit a6921c2, ``load_from_npz``:
it memory-maps each member at its offset in the zip); ``open_npz_members`` does the same.
"""

from __future__ import annotations

import struct
import zipfile
from typing import List, Sequence

import numpy as np

from trainer.config import NUM_SPARSE_FEATURES
from trainer.data.synthetic import _splitmix64

PARETO_A = 0.25  # the reference's shape parameter
DISTRIBUTIONS = ("uniform", "pareto")


class MultiHot:
    """Expands one-hot ids [n, 26] into 26 arrays [n, size_k]."""

    def __init__(self, sizes: Sequence[int], table_sizes: Sequence[int], distribution: str) -> None:
        if distribution not in DISTRIBUTIONS:
            raise ValueError(f"multi-hot distribution {distribution!r}: one of {DISTRIBUTIONS}")
        self.sizes = list(sizes)
        self.rows = np.asarray(table_sizes, dtype=np.uint64)
        self.distribution = distribution

    def expand(self, ids: np.ndarray) -> List[np.ndarray]:
        out = []
        for k, size in enumerate(self.sizes):
            x = ids[:, k].astype(np.uint64)
            if size == 1:
                out.append(x.astype(np.int64)[:, None])
                continue
            j = np.arange(1, size, dtype=np.uint64)
            with np.errstate(over="ignore"):
                key = (x[:, None] * np.uint64(0x9E3779B97F4A7C15)
                       + np.uint64(k) * np.uint64(0xD1B54A32D192ED03) + j)
            h = _splitmix64(key)
            if self.distribution == "uniform":
                extra = h % self.rows[k]
            else:  # Lomax, as numpy's pareto: (1 - u) ** (-1 / a) - 1, truncated, mod rows
                u = (h >> np.uint64(11)).astype(np.float64) / float(1 << 53)
                value = np.minimum((1.0 - u) ** (-1.0 / PARETO_A) - 1.0, 2.0 ** 62)
                extra = value.astype(np.uint64) % self.rows[k]
            out.append(np.concatenate([x[:, None], extra], axis=1).astype(np.int64))
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
