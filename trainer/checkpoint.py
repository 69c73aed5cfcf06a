"""Checkpoints with torch.distributed.checkpoint (DCP) on a path or an fsspec URI.

Layout: ``<checkpoint_dir>/step-<N>/``. DCP writes ``.metadata`` last, so it is the
commit marker: a directory without it (a save cut short by preemption) is never loaded,
and rank 0 removes it at start and after saves. Saves never overwrite a complete
checkpoint; the newest ``keep`` complete ones are kept.

Saves are asynchronous (``dcp.async_save``): the state is copied to host memory on the
calling thread (the only stall training sees), then written by a background thread while
training goes on. The host copy is allocated once and reused by every later save
(``ReusedHostCopy``), sized exactly to this rank's shards: on a 2-core VM a 0.68 GB state stalled training ~7 s per save when
staged into fresh memory (page faults), 0.04 s when copied into the kept buffers. At most one
save is in flight, and none waits for it: a periodic save that falls due while the previous one
is still being written is skipped (``Trainer.save`` agrees on that over the ranks and says so in
metrics.jsonl), so a slow store makes checkpoints rarer, never training slower.

DCP's collectives run on a gloo group of the checkpointer's own, for saves (the upload thread:
they never interleave with the training thread's collectives) and for loads: ranks read very
uneven amounts (a table-wise plan of exact Adagrad tables: 51 GB on one H100 rank, 10 GB on
another, minutes apart at an object store's per-stream rate), and on the default group the
ranks done first would trip its collective timeout (trainer/distributed.py, 5 minutes) and
abort the gang, whose next start would read the same way: a resume that loops. A load's
timeout is derived from the largest read of any rank (``load_timeout_seconds``).
"""

from __future__ import annotations

import concurrent.futures
import copy
import dataclasses
import logging
import math
import re
import time
import weakref
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Dict, List, Optional, Tuple

import fsspec
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter
from torch.distributed.checkpoint import _fsspec_filesystem as dcp_fsspec
from torch.distributed._shard.sharded_tensor import Shard, ShardedTensor
from torch.distributed._state_dict_utils import _copy_state_dict, _create_cpu_state_dict
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.staging import BlockingAsyncStager

log = logging.getLogger(__name__)
__all__ = ["CheckpointException", "Checkpointer", "open_store", "state_bytes"]
_STEP_DIR = re.compile(r"^step-(\d+)$")
AZURE_SCHEMES = ("az", "abfs", "abfss")
# The checkpointer group's timeout (torch's own default for gloo): ranks' uploads may rightly
# differ by minutes, and a load is given at least this long.
GROUP_TIMEOUT_SECONDS = 30 * 60
# A load may take this many times its largest rank's bytes at the assumed per-rank rate:
# object-store reads vary, and the bound only needs to catch a rank that is gone.
LOAD_RATE_MARGIN = 3.0
DEFAULT_READ_BYTES_PER_SECOND = 100e6  # the catalog's per-stream object-store figure
GCS_SCHEMES = ("gs", "gcs")


def open_store(uri: str) -> Tuple[fsspec.AbstractFileSystem, str]:
    """The file system for a checkpoint URI, set up for the identity a pod really has.

    - gs://: gcsfs 2026.x registers ``ExtendedGcsFileSystem`` (zonal / hierarchical buckets,
      env GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT, default on). Its ``makedirs`` (which DCP calls
      before every save) first checks the bucket with ``GET b/<bucket>``
      (``storage.buckets.get``), which ``roles/storage.objectUser`` lacks: gcsfs falls back
      to listing the bucket, an empty bucket lists nothing, and the first save fails with
      "Bucket does not exist". Its ``open`` also asks the Storage Control API for the
      bucket's layout on every file, uncached when that is refused. The checkpoint bucket
      is a plain flat bucket, so the trainer uses gcsfs's plain ``GCSFileSystem``, whose
      ``makedirs`` is a no-op and which needs only object permissions.
    - az://: adlfs decides anonymous access from ``AZURE_STORAGE_ANON`` when not told;
      the trainer passes ``anon=False`` so that ``DefaultAzureCredential`` (workload
      identity: AZURE_CLIENT_ID / AZURE_TENANT_ID / AZURE_FEDERATED_TOKEN_FILE) is used
      whatever the image's environment says, unless a key or connection string is given.
    - s3://: s3fs's default credential chain (IRSA web identity) works as it is.
    Instances are not shared (``skip_instance_cache``): fsspec caches them per process,
    and a cached one would keep a stale endpoint or credential.
    """
    scheme = uri.split("://", 1)[0] if "://" in uri else "file"
    if scheme in GCS_SCHEMES:
        from gcsfs.core import GCSFileSystem  # the plain class, not the package's alias

        fs = GCSFileSystem(skip_instance_cache=True)
        return fs, fs._strip_protocol(uri)
    options: Dict[str, Any] = {"anon": False} if scheme in AZURE_SCHEMES else {}
    return fsspec.core.url_to_fs(uri, skip_instance_cache=True, **options)


class _BoundFileSystem(dcp_fsspec.FileSystem):
    """DCP's fsspec adapter on a file system we built (DCP would build its own from the URI)."""

    def __init__(self, fs: fsspec.AbstractFileSystem) -> None:
        super().__init__()
        self.fs = fs

    def init_path(self, path: Any, **kwargs: Any) -> Any:
        return path


class _StoreWriter(FileSystemWriter):
    def __init__(self, fs: fsspec.AbstractFileSystem, path: str) -> None:
        # Object-store streams have no fileno(): with sync_files DCP would call os.sync()
        # (every dirty page of the host) after each file. A closed object is durable anyway.
        super().__init__(path, sync_files=False)
        self.fs = _BoundFileSystem(fs)
        self.path = path


class _RowRangeReader(FileSystemReader):
    """DCP's FileSystemReader, reading only the rows a rank asks for. DCP's planner intersects
    each of the rank's shards with the saved chunks, but FileSystemReader.read_data torch.loads
    every overlapping chunk whole and narrows it afterwards (torch 2.13
    distributed/checkpoint/filesystem.py): after a world-size change a row-wise shard read
    every saved chunk its rows fall in (MLPerf's exact Adagrad, 1 -> 2 nodes: ~41 GB read to
    keep 5M rows). A saved chunk is one torch.save archive holding its tensor's bytes
    row-major in one uncompressed record (DCP clones a view before saving it), so the rows
    [a, a + n) of a request that spans the chunk's trailing dimensions are one byte range:
    read from the archive's record offset, with the tensor's shape and layout taken from its
    pickle (``map_location="meta"``: a few kB). Any other request (a slice across columns, a
    non-contiguous tensor, bytes) is read as DCP reads it."""

    def read_data(self, plan: Any, planner: Any) -> Any:
        from torch.distributed.checkpoint.planner import LoadItemType

        rest, per_file = [], {}  # type: ignore[var-annotated]
        for req in plan.items:
            info = self.storage_data[req.storage_index]
            if req.type == LoadItemType.TENSOR and not info.transform_descriptors:
                per_file.setdefault(info.relative_path, []).append(req)
            else:
                rest.append(req)
        for relative_path, reqs in per_file.items():
            with self.fs.create_stream(self.fs.concat_path(self.path, relative_path), "rb") as stream:
                rest += [req for req in reqs if not self._read_rows(stream, req, planner)]
        if rest:
            return super().read_data(dataclasses.replace(plan, items=rest), planner)
        done: torch.futures.Future = torch.futures.Future()  # what DCP's reader returns
        done.set_result(None)
        return done

    def _read_rows(self, stream: Any, req: Any, planner: Any) -> bool:
        """Read ``req``'s rows alone into its target; False where its bytes are not one range."""
        info = self.storage_data[req.storage_index]
        view = self._slice_file(stream, info)
        saved = torch.load(view, map_location="meta", weights_only=True)
        if (not isinstance(saved, torch.Tensor) or saved.dim() == 0 or saved.shape[0] == 0
                or not saved.is_contiguous() or saved.storage_offset() != 0
                or list(req.storage_offsets[1:]) != [0] * (saved.dim() - 1)
                or list(req.lengths[1:]) != list(saved.shape[1:])):
            return False
        view.seek(0)
        archive = torch._C.PyTorchFileReader(view)
        records = [n for n in archive.get_all_records() if n.startswith("data/")]
        if len(records) != 1 or archive.get_record_size(records[0]) != saved.nbytes:
            return False
        row = saved.nbytes // saved.shape[0]
        stream.seek(info.offset + archive.get_record_offset(records[0])
                    + int(req.storage_offsets[0]) * row)
        data = bytearray(int(req.lengths[0]) * row)
        got = stream.readinto(data) if hasattr(stream, "readinto") else None
        if got is None:
            chunk = stream.read(len(data))
            got, data[: len(chunk)] = len(chunk), chunk
        if got != len(data):
            raise OSError(f"checkpoint {self.path}/{info.relative_path}: read {got} of "
                          f"{len(data)} bytes of {req.storage_index.fqn}")
        rows = torch.frombuffer(data, dtype=saved.dtype).view(*[int(n) for n in req.lengths])
        target = planner.resolve_tensor(req).detach()
        if target.size() != rows.size():
            raise AssertionError(f"req {req.storage_index} mismatch sizes {target.size()} vs "
                                 f"{rows.size()}")
        target.copy_(rows)
        planner.commit_tensor(req, target)
        return True


class _StoreReader(_RowRangeReader):
    def __init__(self, fs: fsspec.AbstractFileSystem, path: str) -> None:
        super().__init__(path)
        self.fs = _BoundFileSystem(fs)
        self.path = path


def state_bytes(state: Any) -> int:
    """Bytes of tensor data this rank holds in a (nested) state dict."""
    if isinstance(state, dict):
        return sum(state_bytes(v) for v in state.values())
    if hasattr(state, "local_shards"):  # ShardedTensor
        return sum(s.tensor.numel() * s.tensor.element_size() for s in state.local_shards())
    if hasattr(state, "to_local"):  # DTensor
        state = state.to_local()
    if isinstance(state, torch.Tensor):
        return state.numel() * state.element_size()
    return 0


@dataclass
class _Save:
    step: int
    nbytes: int
    started: float
    future: concurrent.futures.Future
    finished: List[float] = field(default_factory=list)  # set by the upload thread


def _host_tensor(like: torch.Tensor, pin: bool) -> torch.Tensor:
    """An empty host tensor of exactly ``like``'s size. Pinned in place (cudaHostRegister, what
    torch's own share-memory staging does) rather than by ``tensor.pin_memory()``, whose
    CachingHostAllocator rounds every block up to a power of two (a 19.1 GiB shard takes 32
    GiB) and which first needs a pageable copy to pin."""
    host = torch.empty(tuple(like.size()), dtype=like.dtype)
    if pin and host.numel() > 0:
        import torch.cuda._pin_memory_utils as pin_memory_utils

        pin_memory_utils.pin_memory(host.data_ptr(), host.numel() * host.element_size())
        weakref.finalize(host, pin_memory_utils.unpin_memory, host.data_ptr())
    return host


def host_copy_of(state: Any, pin: bool) -> Any:
    """Empty host buffers with the structure of ``state``, each exactly its tensor's size:
    a ShardedTensor gets host shards under the same global metadata, with no copy of its
    device data made along the way (torch's ``_create_cpu_state_dict`` moves a GPU
    ShardedTensor to pageable host memory first, then allocates pinned buffers beside it)."""
    if isinstance(state, dict):
        return {k: host_copy_of(v, pin) for k, v in state.items()}
    if isinstance(state, ShardedTensor):
        shards = [Shard(tensor=_host_tensor(s.tensor, pin),
                        metadata=dataclasses.replace(s.metadata, placement=_on_cpu(s.metadata.placement)))
                  for s in state.local_shards()]
        meta = copy.deepcopy(state.metadata())
        for shard_meta in meta.shards_metadata:
            shard_meta.placement = _on_cpu(shard_meta.placement)
        meta.tensor_properties.pin_memory = False
        return ShardedTensor._init_from_local_shards_and_global_metadata(
            shards, meta, process_group=state._process_group)
    if isinstance(state, torch.Tensor) and not hasattr(state, "to_local"):
        if state.dim() == 0:
            return torch.tensor(0, dtype=state.dtype)
        return _host_tensor(state, pin)
    if hasattr(state, "to_local"):  # DTensor: torch's own staging (none in this trainer's state)
        return _create_cpu_state_dict({"v": state}, pin_memory=pin)["v"]
    return copy.deepcopy(state)


def _set_timeout(group: dist.ProcessGroup, seconds: float) -> None:
    """The timeout of every later collective on ``group`` (gloo reads it per operation)."""
    from torch.distributed.distributed_c10d import _set_pg_timeout

    _set_pg_timeout(timedelta(seconds=seconds), group)


def _on_cpu(placement: Any) -> Any:
    return None if placement is None else type(placement)(f"rank:{placement.rank()}/cpu")


class ReusedHostCopy(BlockingAsyncStager):
    """DCP's blocking stager with its cache on: the first save allocates a host copy of the
    state sized exactly to this rank's shards (pinned when there is a GPU, so the
    device-to-host copy is fast; ``host_copy_of``), every later save copies into it. Safe
    because at most one save is in flight (Checkpointer.save waits for the previous one) and
    the state's structure does not change during a run."""

    def __init__(self) -> None:
        super().__init__(cache_staged_state_dict=True)

    def stage(self, state_dict: Dict[str, Any]) -> Dict[str, Any]:
        if self.state_dict_cache is None:
            self.state_dict_cache = host_copy_of(state_dict, pin=torch.cuda.is_available())
        return _copy_state_dict(state_dict, self.state_dict_cache)


class Checkpointer:
    """Save/restore a state dict of Stateful-like parts at step boundaries."""

    def __init__(self, uri: str, keep: int, fs: Optional[fsspec.AbstractFileSystem] = None) -> None:
        self.uri = uri.rstrip("/")
        self.keep = keep
        # Any URI (file:// included) goes through fsspec; a plain path uses DCP's file writer.
        self.remote = "://" in uri or fs is not None
        if fs is not None:  # tests inject slow or failing file systems
            self.fs, self.root = fs, fs._strip_protocol(self.uri)
        else:
            self.fs, self.root = open_store(self.uri)
        # Collective (every rank builds its Checkpointer in the same order).
        self.group = dist.new_group(backend="gloo", timeout=timedelta(seconds=GROUP_TIMEOUT_SECONDS))
        # Per rank, for a load's timeout: the trainer sets its --checkpoint_write_mb_per_sec,
        # the stack's share of the store for one rank (no faster than one stream reads).
        self.read_bytes_per_second = DEFAULT_READ_BYTES_PER_SECOND
        self.pending: Optional[_Save] = None
        self.host_copy = ReusedHostCopy()
        self.bytes_per_second: Optional[float] = None  # of the last finished save in this run
        self.last_seconds: Optional[float] = None

    def _path(self, step: int) -> str:
        return f"{self.root}/step-{step}"

    def _is_complete(self, step: int) -> bool:
        return self.fs.exists(f"{self.root}/step-{step}/.metadata")

    def _step_dirs(self) -> List[int]:
        self.fs.invalidate_cache()  # object-store listings are cached per process; others write too
        if not self.fs.exists(self.root):
            return []
        steps = []
        for entry in self.fs.ls(self.root, detail=False):
            match = _STEP_DIR.match(entry.rstrip("/").rsplit("/", 1)[-1])
            if match:
                steps.append(int(match.group(1)))
        return sorted(steps)

    def complete_steps(self) -> List[int]:
        """Steps of complete checkpoints, oldest first."""
        return [s for s in self._step_dirs() if self._is_complete(s)]

    def _broadcast(self, value: Any) -> Any:
        box = [value]
        if dist.get_world_size() > 1:
            dist.broadcast_object_list(box, src=0)
        return box[0]

    def candidates(self) -> List[int]:
        """Complete steps, newest first, as rank 0 sees them (all ranks get the same list)."""
        return self._broadcast(self.complete_steps()[::-1] if dist.get_rank() == 0 else None)

    def latest(self) -> Optional[int]:
        """Newest complete step, decided on rank 0 and broadcast so all ranks agree."""
        steps = self.candidates()
        return steps[0] if steps else None

    # --- saving ---
    def save(self, step: int, state: Dict[str, Any], blocking: bool = False) -> bool:
        """Collective. Waits for the previous save, then starts this one in the background
        (``blocking``: and waits for it). Returns False if ``step`` is already saved."""
        self.wait()
        exists = self._broadcast(self._is_complete(step) if dist.get_rank() == 0 else None)
        if exists:
            return False
        if dist.get_rank() == 0 and self.fs.exists(self._path(step)):
            self.fs.rm(self._path(step), recursive=True)  # leftover of a cut-short save
        if dist.get_world_size() > 1:
            dist.barrier(group=self.group)
        path = self._path(step)
        writer = _StoreWriter(self.fs, path) if self.remote else FileSystemWriter(path)
        started = time.perf_counter()
        # The stager copies every tensor to host memory before this returns, so training may
        # change the weights at once.
        future = dcp.async_save(state, storage_writer=writer, process_group=self.group,
                                async_stager=self.host_copy)
        record = _Save(step, state_bytes(state), started, future)
        future.add_done_callback(lambda _: record.finished.append(time.perf_counter()))
        self.pending = record
        if blocking:
            self.wait()
        return True

    def busy(self) -> bool:
        """This rank's save in flight is still being written (a finished one is not busy:
        the next save or wait() takes its result without waiting)."""
        return self.pending is not None and not self.pending.future.done()

    @property
    def in_flight(self) -> Optional[int]:
        """The step being written now, if any."""
        return self.pending.step if self.pending is not None else None

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait for the save in flight. False if it is still running after ``timeout``
        seconds (it is then left to run; its directory stays incomplete until it ends)."""
        if self.pending is None:
            return True
        if timeout is not None and not math.isfinite(timeout):
            timeout = None  # "forever": Condition.wait cannot take an infinite float
        try:
            self.pending.future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            return False
        except BaseException:
            self.pending = None  # failed: its directory has no .metadata and is removed later
            raise
        done, self.pending = self.pending, None
        seconds = (done.finished[0] if done.finished else time.perf_counter()) - done.started
        self.last_seconds = seconds
        self.bytes_per_second = done.nbytes / seconds if seconds > 0 else None
        if dist.get_rank() == 0:
            self._prune()
            self.remove_incomplete()
        return True

    def close(self) -> None:
        """Wait for the save in flight (end of training)."""
        self.wait()

    def estimate_seconds(self, state: Dict[str, Any], default_bytes_per_second: float) -> float:
        """How long saving ``state`` would take on this rank: measured throughput of this run's
        last save, else the given default."""
        rate = self.bytes_per_second or default_bytes_per_second
        return state_bytes(state) / rate

    def remove_incomplete(self) -> None:
        """Rank 0: delete step directories without .metadata, except the one being written."""
        for step in self._step_dirs():
            if step == self.in_flight or self._is_complete(step):
                continue
            log.warning("removing incomplete checkpoint step-%d (no .metadata)", step)
            self._remove(step, "incomplete")

    def load(self, step: int, state: Dict[str, Any], optional: Tuple[str, ...] = ()) -> None:
        """Collective, in place: tensors in ``state`` receive the saved values. Top-level keys in
        ``optional`` that the checkpoint lacks (written by an older trainer) are removed from
        ``state`` instead of failing the load. Runs on the checkpointer's group with a timeout
        for the largest read of any rank: uneven reads never trip a collective timeout.

        Each rank reads only the saved chunks that overlap its own shards (DCP's planner
        intersects them), and of each only the rows it keeps (_RowRangeReader; DCP's own reader
        read each overlapping chunk whole). So after a change of world size a row-wise shard
        reads its own rows; a table-wise shard reads its table; a column slice of a chunk
        (column-wise sharding onto another split) still reads the chunk whole. Replicated
        (data-parallel) tensors are read by every rank."""
        path = self._path(step)
        reader = _StoreReader(self.fs, path) if self.remote else _RowRangeReader(path)
        if optional:
            saved = reader.read_metadata().state_dict_metadata
            for key in optional:
                if key in state and key not in saved:
                    del state[key]
        group = self.group
        if dist.get_world_size() > 1:
            _set_timeout(group, self.load_timeout_seconds(state))
        try:
            dcp.load(state, storage_reader=reader, process_group=group)
        finally:
            if dist.get_world_size() > 1:
                _set_timeout(group, GROUP_TIMEOUT_SECONDS)

    def load_timeout_seconds(self, state: Dict[str, Any]) -> float:
        """Collective: how long the load of ``state`` may make a rank wait for the others: the
        largest rank's bytes at the assumed per-rank rate, with LOAD_RATE_MARGIN, and never
        under the group's own timeout. MLPerf's exact Adagrad tables on 8 H100 (51 GB on the
        fullest rank at 100 MB/s): 1,530 s, so the 30-minute floor decides."""
        need = torch.tensor([float(state_bytes(state))], dtype=torch.float64)
        if dist.get_world_size() > 1:
            dist.all_reduce(need, op=dist.ReduceOp.MAX, group=self.group)
        return max(float(GROUP_TIMEOUT_SECONDS),
                   LOAD_RATE_MARGIN * float(need) / self.read_bytes_per_second)

    def _prune(self) -> None:
        for step in self.complete_steps()[: -self.keep]:
            self._remove(step, "old")

    def _remove(self, step: int, what: str) -> None:
        try:
            self.fs.rm(self._path(step), recursive=True)
        except OSError as err:  # another process may be listing it; try again after a save
            log.warning("could not remove %s checkpoint step-%d: %s", what, step, err)
