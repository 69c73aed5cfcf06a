"""A rank's stream of batches, built by reader processes and handed over in global order.

One Python thread cannot both parse/slice data and drive the training step at 150k samples/s
per rank (they share the GIL: bench/data_bench.py), so with ``--data_workers W`` (W > 0) the
rank's batches come from ``W`` reader processes: reader ``w`` builds global batches
``first + w, first + w + W, ...`` (its own ``BatchSource``, this rank's slice of each) and
``torch.utils.data.DataLoader`` (``batch_size=None`` over an ``IterableDataset``) hands them
over round-robin, reader 0, 1, ..., W-1, 0, ... (torch/utils/data/dataloader.py,
``_MultiProcessingDataLoaderIter``: tasks are sent to workers in turn and results returned in
task order; a worker whose iterator ends is skipped). The stream is therefore exactly the
in-process one: sample ``i`` and the resume position do not depend on W (tests/trainer/
test_loader.py). Readers send one shared-memory buffer per batch holding its four plain
tensors (trainer/data/batch.py ``pack``) and the malformed rows they dropped since their last
batch; the trainer takes views of it and builds the KeyedJaggedTensor, which is cheaper than
pickling one.

Readers are started from a 'forkserver' process, never by fork() from the trainer: by the
time the train stream opens, NCCL and libfabric (EFA / InfiniBand verbs) have registered
memory, and a fork()ed child shares it copy-on-write, which corrupts data unless the library
was set up for fork before any registration, and with huge pages only with extra checks
(ibv_fork_init(3), rdma-core: "EINVAL indicates that there had been RDMA memory registration
already and it is therefore not safe anymore to fork"; RDMAV_HUGEPAGES_SAFE "is required if
an application uses huge pages"). The same page: fork support "is not necessary if all ...
child processes ... change address spaces via an exec() operation", which is what starting
the forkserver does (fork+exec of a fresh interpreter that imports this module once); each
reader is then forked from the forkserver, which never touched the fabric.

``W = 0`` keeps the old path: one background thread in the trainer process.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from typing import Callable, Iterator, Optional, Tuple

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info
from torchrec.datasets.utils import Batch

from trainer.config import TrainConfig
from trainer.data.batch import BatchTensors, assemble, pack, unpack
from trainer.data.criteo import LineIndex
from trainer.data.prefetch import Prefetched
from trainer.data.source import BatchSource, make_source

Item = Tuple[BatchTensors, int]  # a batch's tensors, malformed rows dropped since the last one
Sent = Tuple[torch.Tensor, int]  # the same, packed into one shared-memory buffer
READERS = 2  # per rank for TSV unless --data_workers says otherwise
# Per rank at most, for multi-hot drawn on the fly: 8 readers at ~31 ms a 4,096-sample batch
# build one in ~3.9 ms, under an H100's ~8.3 ms MLPerf step; more only add memory and start-up.
MULTI_HOT_READERS = 8
CORES_KEPT = 2  # a rank's own: the training loop and the thread assembling the batches
AHEAD = 16  # batches built ahead per rank (as the old prefetch thread): smooths slow batches


class _Slices(IterableDataset):
    """What one reader process iterates: every ``num_workers``-th batch of a split.

    Holds only the configuration: each reader opens its own source (memory maps and open
    files are not shared across processes)."""

    def __init__(self, cfg: TrainConfig, rank: int, world_size: int, batch_size: int,
                 split: str, epoch: int, first: int, stop: Optional[int]) -> None:
        self.args = (cfg, rank, world_size, batch_size)
        self.part = (split, epoch, first, stop)
        self.indexes = LineIndex.known()  # TSV line indexes the trainer process already has

    def __iter__(self) -> Iterator[Sent]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info else (0, 1)
        LineIndex.adopt(self.indexes)
        source = make_source(*self.args)
        split, epoch, first, stop = self.part
        counted = 0
        for tensors in source.tensors(split, epoch, first + worker, stop, stride=workers):
            yield pack(tensors), source.malformed_rows - counted
            counted = source.malformed_rows


def _quiet_reader(worker: int) -> None:
    """Readers leave SIGTERM/SIGINT to the trainer (it stops at an agreed step and then shuts
    them down); a reader killed first would fail the next batch instead."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def reader_context() -> multiprocessing.context.BaseContext:
    """forkserver with this module preloaded: readers start in ~0.1 s, not an import each."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    return context


def cores_per_rank() -> int:
    """The CPUs this process may run on (its affinity mask: all of the node's in a pod without
    the kubelet's static CPU manager), shared by the node's ranks (torchrun's
    LOCAL_WORLD_SIZE): 24 on a p5.48xlarge (192 vCPUs, 8 ranks). The pod's CPU limit
    (workloads/sizing.py: the node's vCPUs less its daemons' share) is a cgroup quota, not
    read here: MULTI_HOT_READERS keeps readers well under it."""
    local_ranks = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    return max(1, len(os.sched_getaffinity(0)) // local_ranks)


def readers_for(cfg: TrainConfig, source: BatchSource, cores: Optional[int] = None) -> int:
    """--data_workers, or its default: READERS for TSV (parsing is the costly part) where the
    rank has a core for each reader beside its own, none for synthetic data (a GPU step at a
    large batch outruns one thread drawing it: bench/train_throughput.py gives readers there)
    and memory-mapped .npy/.npz days, where a slice costs less than handing the batch over from another process
    (bench/data_bench.py on 2 cores: one-hot .npy 2.9M samples/s through the thread vs 0.44M
    through 2 readers; MLPerf multi-hot .npz 0.73M vs 0.24M; TSV at batch 8192 0.30M vs
    0.45M). Readers without cores of their own take them from the training loop: on 2 cores,
    TSV at batch 2048 waited 3.1% of a GPU-like step with 2 readers and 0.9% with the thread."""
    if cfg.data_workers is not None:
        return cfg.data_workers
    if cfg.dataset_path is None:
        return 0
    cores = cores or cores_per_rank()
    # Multi-hot drawn on the fly (--multi_hot_sizes over one-hot days) costs compute like TSV
    # parsing: expanding to MLPerf's 214 ids a sample and building the KJT took ~31 ms a
    # 4,096-sample batch on one core here (TorchRec/MLPerf review), beside an H100 step of
    # ~8.3 ms: 2 readers (15 ms a batch) left 2 x p5 input-bound at 1.9x, so a GPU node's
    # spare cores draw it (multi_hot_readers).
    if cfg.multi_hot_sizes:
        return multi_hot_readers(cores)
    if getattr(source, "format", None) != "tsv":
        return 0
    return READERS if cores > READERS else 0


def multi_hot_readers(cores: int) -> int:
    """Reader processes a rank with ``cores`` CPUs gives on-the-fly multi-hot: all but its own
    CORES_KEPT, at most MULTI_HOT_READERS; none (the thread) where none is spare. The sizing
    advisor (torchrec_cloud/plan.py) counts the same."""
    return max(0, min(cores - CORES_KEPT, MULTI_HOT_READERS))


class BatchStream(Iterator[Batch]):
    """This rank's batches of one split from global batch ``first`` on (below ``stop``),
    built ``AHEAD`` ahead by ``workers`` reader processes (0: by the thread below); pinned
    when ``pin`` (page-locked host memory lets the pipeline's copy overlap compute).

    A background thread takes the readers' tensors (unpickling, shared-memory mapping) and
    builds each Batch, so the training thread only pops finished batches. Malformed rows the
    readers drop are added to ``source.malformed_rows``. Open one per epoch and keep it
    across evaluation segments: readers start once, and nothing built ahead is lost."""

    def __init__(self, source: BatchSource, cfg: TrainConfig, rank: int, world_size: int,
                 batch_size: int, split: str, epoch: int, first: int,
                 stop: Optional[int] = None, workers: int = 0, pin: bool = False) -> None:
        self.source = source
        self._readers: Optional[Iterator[Sent]] = None
        if workers == 0:
            items: Iterator[Item] = ((t, 0) for t in source.tensors(split, epoch, first, stop))
        else:
            warm = getattr(source, "warm", None)
            if warm is not None:
                warm(split)
            loader = DataLoader(
                _Slices(cfg, rank, world_size, batch_size, split, epoch, first, stop),
                batch_size=None, num_workers=workers, pin_memory=pin,
                prefetch_factor=max(2, AHEAD // workers),
                multiprocessing_context=reader_context(), worker_init_fn=_quiet_reader)
            self._readers = iter(loader)  # starts the readers (from this thread)
            items = ((unpack(buffer), bad) for buffer, bad in self._readers)
            pin = False  # the DataLoader pins
        self._thread: Prefetched[Tuple[Batch, int]] = Prefetched(
            ((assemble(t.pin_memory() if pin else t), bad) for t, bad in items), depth=AHEAD)

    def __next__(self) -> Batch:
        batch, malformed = next(self._thread)
        self.source.malformed_rows += malformed
        return batch

    def next_or_none(self, stopped: Optional[Callable[[], bool]] = None) -> Optional[Batch]:
        """The next batch, or None at the end or once ``stopped()`` while waiting for it."""
        if stopped is not None and not self._thread.wait_ready(stopped):
            return None
        return next(self, None)

    def close(self) -> None:
        """Stop the thread, then the reader processes (idempotent)."""
        self._thread.close()
        shutdown = getattr(self._readers, "_shutdown_workers", None)
        if shutdown is not None:  # torch's own clean-up (also run when the iterator is freed)
            shutdown()
        self._readers = None
