"""The one interface the train loop uses for data, and the factory that picks a source."""

from __future__ import annotations

from typing import Iterator, Protocol

from torchrec.datasets.utils import Batch

from trainer.config import TrainConfig


class BatchSource(Protocol):
    """Per-rank stream of fixed-size batches, restartable at any (epoch, batch)."""

    malformed_rows: int

    def train_batches(self, epoch: int, start: int) -> Iterator[Batch]:
        """Batches of ``epoch`` from batch number ``start`` on (resume point)."""
        ...

    def eval_batches(self, count: int) -> Iterator[Batch]:
        """Up to ``count`` held-out batches, the same ones every time."""
        ...


def make_source(cfg: TrainConfig, rank: int, world_size: int) -> BatchSource:
    if cfg.dataset_path is None:
        from trainer.data.synthetic import SyntheticSource

        return SyntheticSource(cfg.table_sizes, cfg.batch_size, cfg.seed, rank,
                               cfg.synthetic_steps_per_epoch)
    from trainer.data.criteo import CriteoSource

    return CriteoSource(cfg.dataset_path, cfg.table_sizes, cfg.batch_size, rank, world_size)
