"""What every batch source is (``BatchSource``) and how a resume position maps to a batch.

The sources (criteo.py, synthetic.py) import this; the chooser above them (source.py's
``make_source``) imports them, so nothing imports back up."""

from __future__ import annotations

from typing import Iterator, Optional, Protocol

from torchrec.datasets.utils import Batch

from trainer.data.batch import BatchTensors


class BatchSource(Protocol):
    """This rank's share of a stream of global batches, restartable at any global sample.

    Positions count samples of the whole job (every rank), so a checkpoint written by N
    ranks resumes on M ranks without repeating or skipping a sample: global batch ``s``
    covers samples ``[s*G, (s+1)*G)`` and rank ``r`` takes the ``r``-th slice of it."""

    malformed_rows: int
    batch_size: int  # this rank's share of each global batch

    def train_batches(self, epoch: int, first_sample: int) -> Iterator[Batch]:
        """This rank's slices of the global batches of ``epoch`` from global sample
        ``first_sample`` on (the resume point, a multiple of the global batch)."""
        ...

    def eval_batches(self, count: Optional[int]) -> Iterator[Batch]:
        """This rank's slices of the first ``count`` held-out global batches (None: all of
        them, the last partial one padded with rows labelled -1): the same held-out samples
        every time and whatever the world size."""
        ...

    def train_samples(self) -> int:
        """Samples in one epoch of training data."""
        ...

    def test_batches(self, count: Optional[int]) -> Iterator[Batch]:
        """This rank's slices of the first ``count`` global batches of the test set, scored
        once at the end; none where the data has no test set."""
        ...

    def tensors(self, split: str, epoch: int, first: int, stop: Optional[int] = None,
                stride: int = 1) -> Iterator[BatchTensors]:
        """Global batches ``first, first + stride, ...`` (below ``stop``) of ``split``
        ('train', 'val' or 'test'), this rank's slice of each, before their KJT: reader
        process ``w`` of ``W`` builds ``first + w, first + w + W, ...`` (trainer/data/loader.py)."""
        ...


def first_step(first_sample: int, global_batch: int) -> int:
    """The global batch a resume position starts; it must be a batch boundary."""
    if first_sample % global_batch:
        raise ValueError(f"data position {first_sample} is not a multiple of the global batch "
                         f"{global_batch}")
    return first_sample // global_batch
