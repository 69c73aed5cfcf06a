"""Turn arrays of rows into TorchRec ``Batch`` objects (one id per feature, Criteo style)."""

from __future__ import annotations

from typing import List

import numpy as np
import torch
from torchrec.datasets.criteo import DEFAULT_CAT_NAMES
from torchrec.datasets.utils import Batch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

SPARSE_KEYS: List[str] = list(DEFAULT_CAT_NAMES)


def make_batch(dense: np.ndarray, sparse: np.ndarray, labels: np.ndarray) -> Batch:
    """dense [B,13] float, sparse [B,26] int (already hashed), labels [B] in {0,1}."""
    batch_size, num_features = sparse.shape
    # KJT values are feature-major: all of feature 0's ids, then feature 1's ...
    values = torch.from_numpy(np.ascontiguousarray(sparse.T.reshape(-1)).astype(np.int64))
    return Batch(
        dense_features=torch.from_numpy(np.ascontiguousarray(dense, dtype=np.float32)),
        sparse_features=KeyedJaggedTensor.from_lengths_sync(
            keys=SPARSE_KEYS[:num_features],
            values=values,
            lengths=torch.ones(batch_size * num_features, dtype=torch.int32),
        ),
        labels=torch.from_numpy(np.ascontiguousarray(labels, dtype=np.float32).reshape(-1)),
    )
