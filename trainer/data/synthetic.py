"""Synthetic click data with a known, learnable signal and Criteo-like skewed ids.

Each batch is a pure function of (seed, split, rank, index): a resumed run regenerates
exactly the batches it would have seen, and nothing is cached or cycled. Labels are drawn
from ``sigmoid(w . dense + sum_f score_f(id_f) + bias)`` where ``score_f`` is a fixed hash
of (seed, feature, id): a model must learn per-id embeddings to reach a good AUC, and hot
ids (power-law popularity, like Criteo) are learnt first.
"""

from __future__ import annotations

from typing import Iterator, List

import numpy as np
from torchrec.datasets.utils import Batch

from trainer.config import NUM_DENSE_FEATURES
from trainer.data.batch import make_batch

TRAIN, EVAL = 0, 1
# Popularity skew: id rank = N * u**SKEW; with 5, the top 1% of ids draw ~40% of lookups.
SKEW = 5.0
SPARSE_SIGNAL = 0.6  # scale of each feature's per-id score
DENSE_SIGNAL = 0.5  # scale of the dense weights
BIAS = -1.0  # ~30% positives, like an ad click log sampled for training

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


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
    """Per-rank batch stream of synthetic data; see the module docstring."""

    def __init__(self, table_sizes: List[int], batch_size: int, seed: int, rank: int,
                 steps_per_epoch: int) -> None:
        self.table_sizes = np.asarray(table_sizes, dtype=np.uint64)
        self.batch_size = batch_size
        self.seed = seed
        self.rank = rank
        self.steps_per_epoch = steps_per_epoch
        rng = np.random.default_rng([seed, 0xD15E])
        self.dense_weights = rng.normal(0.0, DENSE_SIGNAL, NUM_DENSE_FEATURES)
        self.malformed_rows = 0

    def batch(self, split: int, index: int) -> Batch:
        """The batch number ``index`` of ``split`` for this rank; deterministic."""
        rng = np.random.default_rng([self.seed, split, self.rank, index])
        b, f = self.batch_size, len(self.table_sizes)
        dense = rng.standard_normal((b, NUM_DENSE_FEATURES))
        popularity = (rng.random((b, f)) ** SKEW * self.table_sizes).astype(np.uint64)
        # Scatter popular ids over the table (a bijection would need N prime; a hash is enough).
        feature = np.arange(f, dtype=np.uint64)
        ids = _splitmix64(popularity * np.uint64(131) + feature) % self.table_sizes
        seed_mix = np.uint64(self.seed) * np.uint64(0x632BE59BD9B4E019)
        score = _unit(_splitmix64(ids ^ _splitmix64(feature + seed_mix))) * SPARSE_SIGNAL
        logit = dense @ self.dense_weights + score.sum(axis=1) + BIAS
        labels = (rng.random(b) < 1.0 / (1.0 + np.exp(-logit))).astype(np.float32)
        return make_batch(dense.astype(np.float32), ids.astype(np.int64), labels)

    def train_batches(self, epoch: int, start: int) -> Iterator[Batch]:
        for i in range(start, self.steps_per_epoch):
            yield self.batch(TRAIN, epoch * self.steps_per_epoch + i)

    def eval_batches(self, count: int) -> Iterator[Batch]:
        for i in range(count):
            yield self.batch(EVAL, i)
