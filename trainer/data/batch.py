"""Turn arrays of rows into TorchRec ``Batch`` objects (one id or several per feature)."""

from __future__ import annotations

from typing import List, Sequence, Union

import numpy as np
import torch
from torchrec.datasets.criteo import DEFAULT_CAT_NAMES
from torchrec.datasets.utils import Batch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

SPARSE_KEYS: List[str] = list(DEFAULT_CAT_NAMES)
Sparse = Union[np.ndarray, Sequence[np.ndarray]]  # [B, 26] one-hot, or 26 arrays [B, size_k]


def make_batch(dense: np.ndarray, sparse: Sparse, labels: np.ndarray) -> Batch:
    """dense [B,13] float, sparse ids (already hashed), labels [B] in {0,1}."""
    batch_size = len(labels)
    if isinstance(sparse, np.ndarray):  # one-hot: the same as 26 features of size 1
        sparse = [sparse[:, k:k + 1] for k in range(sparse.shape[1])]
    # KJT values are feature-major: all of feature 0's ids (sample by sample), then feature 1's ...
    values = torch.from_numpy(np.concatenate([f.reshape(-1) for f in sparse]).astype(np.int64))
    lengths = np.repeat(np.array([f.shape[1] for f in sparse], dtype=np.int32), batch_size)
    return Batch(
        dense_features=torch.from_numpy(np.ascontiguousarray(dense, dtype=np.float32)),
        sparse_features=KeyedJaggedTensor.from_lengths_sync(
            keys=SPARSE_KEYS[:len(sparse)],
            values=values,
            lengths=torch.from_numpy(lengths),
        ),
        labels=torch.from_numpy(np.ascontiguousarray(labels, dtype=np.float32).reshape(-1)),
    )
