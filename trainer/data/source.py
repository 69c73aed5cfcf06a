"""The factory that picks a batch source: above the sources it chooses from.

``BatchSource`` and ``first_step`` live in stream.py, which the sources import; they are
re-exported here for the callers that know them by this module."""

from __future__ import annotations

from trainer.config import TrainConfig
from trainer.data.criteo import CriteoSource
from trainer.data.multi_hot import MultiHot
from trainer.data.stream import BatchSource, first_step
from trainer.data.synthetic import SyntheticSource

__all__ = ["BatchSource", "first_step", "make_source"]


def make_source(cfg: TrainConfig, rank: int, world_size: int, batch_size: int) -> BatchSource:
    """``batch_size`` is per rank: the global batch (kept across resumes) over ``world_size``."""
    multi_hot = (MultiHot(cfg.multi_hot_sizes, cfg.table_sizes, cfg.multi_hot_distribution_type)
                 if cfg.multi_hot_sizes else None)
    if cfg.dataset_path is None:
        return SyntheticSource(cfg.table_sizes, batch_size, cfg.seed, rank,
                               cfg.synthetic_steps_per_epoch, world_size, multi_hot)
    return CriteoSource(cfg.dataset_path, cfg.table_sizes, batch_size, rank, world_size, multi_hot)
