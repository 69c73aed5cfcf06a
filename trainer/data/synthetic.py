"""Synthetic click data with a known, learnable signal and Criteo-like skewed ids.

Every sample is a pure function of (seed, split, global sample index): sample ``i`` is the
same whatever the world size, so a run resumed on another number of ranks sees exactly the
samples the original run would have, and nothing is cached across runs or cycled. Samples
are drawn a block at a time (one generator per ``BLOCK`` samples) so the cost stays that of
vectorised numpy. Labels come from ``sigmoid(w . dense + sum_f score_f(id_f) + bias)`` where
``score_f`` is a fixed hash of (seed, feature, id): a model must learn per-id embeddings to
reach a good AUC, and hot ids (power-law popularity, like Criteo) are learnt first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Iterator, List, Optional, Tuple

import numpy as np
from torchrec.datasets.utils import Batch

from trainer.config import NUM_DENSE_FEATURES
from trainer.data.batch import BatchTensors, assemble, batch_tensors
from trainer.data.stream import first_step

if TYPE_CHECKING:  # only a type here: the source is handed one
    from trainer.data.multi_hot import MultiHot

TRAIN, EVAL = 0, 1
# Popularity skew: id rank = N * u**SKEW; with 5, the top 1% of ids draw ~40% of lookups.
SKEW = 5.0
SPARSE_SIGNAL = 0.6  # scale of each feature's per-id score
DENSE_SIGNAL = 0.5  # scale of the dense weights
BIAS = -1.0  # ~30% positives, like an ad click log sampled for training
HELD_OUT_SHARE = 10  # --eval_batches -1 on synthetic data: steps per epoch / this global batches
BLOCK = 1024  # samples drawn by one generator; a rank's batch reuses the block it falls in

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)
Rows = Tuple[np.ndarray, np.ndarray, np.ndarray]  # dense [n,13] f32, ids [n,F] i64, labels [n] f32


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """Vectorised splitmix64: a fast, well-mixed integer hash (uint64 wraps by design)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _unit(h: np.ndarray) -> np.ndarray:
    """uint64 hash -> float in [-1, 1)."""
    return (h >> np.uint64(11)).astype(np.float64) / float(1 << 53) * 2.0 - 1.0


class SyntheticSource:
    """This rank's share of each global batch of synthetic data; see the module docstring.

    ``batch_size`` is per rank; a global batch is ``batch_size * world_size`` consecutive
    samples and rank ``r`` takes the ``r``-th contiguous slice of it."""

    def __init__(self, table_sizes: List[int], batch_size: int, seed: int, rank: int,
                 steps_per_epoch: int, world_size: int = 1,
                 multi_hot: Optional["MultiHot"] = None) -> None:
        self.multi_hot = multi_hot
        self.table_sizes = np.asarray(table_sizes, dtype=np.uint64)
        self.batch_size = batch_size
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.global_batch = batch_size * world_size
        self.steps_per_epoch = steps_per_epoch
        rng = np.random.default_rng([seed, 0xD15E])
        self.dense_weights = rng.normal(0.0, DENSE_SIGNAL, NUM_DENSE_FEATURES)
        self.malformed_rows = 0
        self._blocks: Dict[int, Tuple[int, Rows]] = {}  # split -> (block number, rows): last one

    def _block(self, split: int, number: int) -> Rows:
        """All ``BLOCK`` samples of one block; drawn whole so each sample is fixed by its index."""
        cached = self._blocks.get(split)
        if cached is not None and cached[0] == number:
            return cached[1]
        rng = np.random.default_rng([self.seed, split, number])
        f = len(self.table_sizes)
        dense = rng.standard_normal((BLOCK, NUM_DENSE_FEATURES))
        popularity = (rng.random((BLOCK, f)) ** SKEW * self.table_sizes).astype(np.uint64)
        # Scatter popular ids over the table (a bijection would need N prime; a hash is enough).
        feature = np.arange(f, dtype=np.uint64)
        ids = _splitmix64(popularity * np.uint64(131) + feature) % self.table_sizes
        with np.errstate(over="ignore"):
            seed_mix = np.uint64(self.seed) * np.uint64(0x632BE59BD9B4E019)
        score = _unit(_splitmix64(ids ^ _splitmix64(feature + seed_mix))) * SPARSE_SIGNAL
        logit = dense @ self.dense_weights + score.sum(axis=1) + BIAS
        labels = (rng.random(BLOCK) < 1.0 / (1.0 + np.exp(-logit))).astype(np.float32)
        rows = (dense.astype(np.float32), ids.astype(np.int64), labels)
        self._blocks[split] = (number, rows)
        return rows

    def samples(self, split: int, first: int, count: int) -> Batch:
        """Global samples ``[first, first + count)`` of ``split`` as one batch."""
        return assemble(self.samples_tensors(split, first, count))

    def samples_tensors(self, split: int, first: int, count: int) -> BatchTensors:
        parts: List[Rows] = []
        index = first
        while index < first + count:
            number, offset = divmod(index, BLOCK)
            take = min(BLOCK - offset, first + count - index)
            parts.append(tuple(a[offset:offset + take] for a in self._block(split, number)))  # type: ignore[misc]
            index += take
        dense, ids, labels = (np.concatenate(a) for a in zip(*parts))
        return batch_tensors(dense, self.multi_hot.expand(ids) if self.multi_hot else ids, labels)

    def batch(self, split: int, step: int) -> Batch:
        """This rank's slice of global batch number ``step`` of ``split``."""
        return assemble(self._slice(split, step))

    def _slice(self, split: int, step: int) -> BatchTensors:
        return self.samples_tensors(split, step * self.global_batch + self.rank * self.batch_size,
                                    self.batch_size)

    def train_batches(self, epoch: int, first_sample: int) -> Iterator[Batch]:
        """Every epoch is fresh data: epoch ``e`` is the ``e``-th run of ``steps_per_epoch`` steps."""
        return map(assemble, self.tensors("train", epoch, first_step(first_sample, self.global_batch)))

    def eval_batches(self, count: Optional[int]) -> Iterator[Batch]:
        return map(assemble, self.tensors("val", 0, 0, count))

    def train_samples(self) -> int:
        return self.steps_per_epoch * self.global_batch

    def test_batches(self, count: int) -> Iterator[Batch]:
        """Synthetic data has no test set: the eval split is its only held-out data."""
        return iter(())

    def tensors(self, split: str, epoch: int, first: int, stop: Optional[int] = None,
                stride: int = 1) -> Iterator[BatchTensors]:
        """Global batches ``first, first + stride, ...`` below ``stop`` of ``split`` (no test set)."""
        if split == "test":
            return
        if split == "train":
            end = self.steps_per_epoch if stop is None else min(self.steps_per_epoch, stop)
        else:  # held out: as many batches as asked for; "all" (None) is a tenth of an epoch
            end = stop if stop is not None else max(1, self.steps_per_epoch // HELD_OUT_SHARE)
        offset = epoch * self.steps_per_epoch if split == "train" else 0
        for step in range(first, end, stride):
            yield self._slice(TRAIN if split == "train" else EVAL, offset + step)
