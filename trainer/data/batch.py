"""Turn arrays of rows into TorchRec ``Batch`` objects (one id or several per feature).

Two halves, so a reader process can do the first and the trainer the second:
``batch_tensors`` (numpy rows -> four plain tensors, cheap to send between processes through
shared memory) and ``assemble`` (tensors -> ``Batch`` with its ``KeyedJaggedTensor``)."""

from __future__ import annotations

from typing import List, NamedTuple, Sequence, Union

import numpy as np
import torch
from torchrec.datasets.criteo import DEFAULT_CAT_NAMES
from torchrec.datasets.utils import Batch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

SPARSE_KEYS: List[str] = list(DEFAULT_CAT_NAMES)
Sparse = Union[np.ndarray, Sequence[np.ndarray]]  # [B, 26] one-hot, or 26 arrays [B, size_k]


# Ids travel as int32, as the reference's do (its .npy/.npz ids are int32 and its KJT takes them
# as they are: torchrec 1.8 InMemoryBinaryCriteoIterDataPipe, mlcommons' MultiHotCriteoIterDataPipe
# asserts int32): half the bytes of int64 in the input all-to-all, the host-to-device copy and
# the reader processes' shared memory. TorchRec's KJT and FBGEMM's lookups take int32 values
# with int32 lengths. A table of 2**31 rows or more keeps int64.
ID_LIMIT = 2**31


def id_values(values: np.ndarray) -> np.ndarray:
    """Flat ids as int32 when every id fits (always, for tables below ``ID_LIMIT`` rows)."""
    if values.dtype == np.int32 or (values.size and int(values.max()) >= ID_LIMIT):
        return values
    return values.astype(np.int32)


class BatchTensors(NamedTuple):
    """A batch before its KJT: dense [B,13] f32, values (feature-major) i32 (i64 only for ids of
    2**31 or more), lengths [26*B] i32 (the ids per feature and sample: the multi-hot sizes),
    labels [B] f32."""

    dense: torch.Tensor
    values: torch.Tensor
    lengths: torch.Tensor
    labels: torch.Tensor

    def pin_memory(self) -> "BatchTensors":
        return BatchTensors(*(t.pin_memory() for t in self))


def batch_tensors(dense: np.ndarray, sparse: Sparse, labels: np.ndarray) -> BatchTensors:
    """dense [B,13] float, sparse ids (already hashed), labels [B] in {0,1}."""
    batch_size = len(labels)
    if isinstance(sparse, np.ndarray):  # one-hot: [B, 26] transposed is feature-major already
        values = id_values(np.ascontiguousarray(sparse.T).reshape(-1))
        sizes = np.ones(sparse.shape[1], dtype=np.int32)
    else:  # KJT values are feature-major: feature 0's ids (sample by sample), then feature 1's
        values = id_values(np.concatenate([np.asarray(f).reshape(-1) for f in sparse]))
        sizes = np.array([f.shape[1] for f in sparse], dtype=np.int32)
    return BatchTensors(
        torch.from_numpy(np.ascontiguousarray(dense, dtype=np.float32)),
        torch.from_numpy(values),
        torch.from_numpy(np.repeat(sizes, batch_size)),
        torch.from_numpy(np.ascontiguousarray(labels, dtype=np.float32).reshape(-1)),
    )


PAD_LABEL = -1.0  # a padding row: forwarded to keep every rank's batch full, never scored


def pad_rows(dense: np.ndarray, sparse: Sparse, labels: np.ndarray, size: int
             ) -> tuple:
    """Rows appended up to ``size``: zero dense features, id 0 of every table (one id per
    multi-hot slot), label PAD_LABEL. The last global batch of a held-out set is partial; a
    rank's slice of it padded to the usual batch keeps every rank's forward (and its
    all-to-alls) alike, and the evaluation drops rows labelled PAD_LABEL afterwards."""
    pad = size - len(labels)
    dense = np.concatenate([np.asarray(dense, dtype=np.float32),
                            np.zeros((pad, dense.shape[1]), dtype=np.float32)])
    labels = np.concatenate([np.asarray(labels, dtype=np.float32).reshape(-1),
                             np.full(pad, PAD_LABEL, dtype=np.float32)])
    if isinstance(sparse, np.ndarray):
        sparse = np.concatenate([sparse, np.zeros((pad, sparse.shape[1]), dtype=sparse.dtype)])
    else:
        sparse = [np.concatenate([f, np.zeros((pad, f.shape[1]), dtype=f.dtype)]) for f in sparse]
    return dense, sparse, labels


HEADER = 4  # int64: samples, values, lengths, bytes per id (4 or 8)


def pack(t: BatchTensors) -> torch.Tensor:
    """The four tensors in one shared-memory byte buffer: a reader process sends one file
    descriptor per batch instead of four (each costs the trainer ~0.4 ms to receive:
    bench/data_bench.py's readers delivered 3x more with one). Layout: header, values (int32,
    or int64 8-aligned), dense, lengths, labels (4-byte each)."""
    parts = [t.values.numpy(), t.dense.numpy(), t.lengths.numpy(), t.labels.numpy()]
    header = np.array([len(t.labels), len(t.values), len(t.lengths), t.values.element_size()],
                      dtype=np.int64)
    total = header.nbytes + sum(p.nbytes for p in parts)
    buffer = torch.empty(total, dtype=torch.uint8).share_memory_()
    raw, at = buffer.numpy(), 0
    for part in (header, *parts):
        raw[at:at + part.nbytes] = part.reshape(-1).view(np.uint8)
        at += part.nbytes
    return buffer


def unpack(buffer: torch.Tensor) -> BatchTensors:
    """Views into a ``pack``ed buffer (no copy)."""
    samples, values, lengths, id_bytes = buffer[:8 * HEADER].view(torch.int64).tolist()
    at, out = 8 * HEADER, []
    id_dtype = torch.int32 if id_bytes == 4 else torch.int64
    for count, dtype, size in ((values, id_dtype, id_bytes), (samples * 13, torch.float32, 4),
                               (lengths, torch.int32, 4), (samples, torch.float32, 4)):
        out.append(buffer[at:at + count * size].view(dtype))
        at += count * size
    return BatchTensors(out[1].view(samples, 13), out[0], out[2], out[3])


def assemble(t: BatchTensors) -> Batch:
    """The ``Batch`` the model takes; keys are the first ``len(lengths) / B`` Criteo features."""
    features = len(t.lengths) // max(len(t.labels), 1)
    return Batch(
        dense_features=t.dense,
        sparse_features=KeyedJaggedTensor.from_lengths_sync(
            keys=SPARSE_KEYS[:features], values=t.values, lengths=t.lengths),
        labels=t.labels,
    )
