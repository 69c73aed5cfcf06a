"""Rank 0's metrics, readable from a laptop: a copy of metrics.jsonl and the TensorBoard event
files in the checkpoint bucket, ``<telemetry_dir>/metrics.jsonl`` and
``<telemetry_dir>/tensorboard/`` (the stack passes ``<checkpoint_uri>/telemetry``).

The trainer writes both on the shared file system, which only the cluster mounts; object stores
cannot append, so the files are copied whole. The copy runs on a background thread, never in
the training step: every ``--telemetry_every_seconds``, at once after each checkpoint is
started, and a last time when the trainer leaves (normal end, SIGTERM, crash), bounded so an
unreachable store cannot hold a preempted pod past its deadline. Only files whose size or
modification time changed since their last upload are sent. A copy of metrics.jsonl ends at
its last complete line, so a reader never sees half a record. An upload that fails is logged
and retried at the next turn: telemetry never stops training.

The bucket's metrics.jsonl outlives the shared file system (`pulumi destroy` then `up` makes a
new, empty one), and a whole-file copy of a new local file would overwrite the earlier
generations' records there. So before anything writes the local file (``start``, called before
the fabric gate and the trainer open it for appending), the mirror reads the bucket's copy and,
unless the local file already begins with it, makes the local file the bucket's records followed
by what it has beyond their common beginning (``merge``): one metrics.jsonl, the whole history,
each record once, for every reader (status, tensorboard, the report). That read is bounded
(SEED_SECONDS): the other ranks wait for rank 0. If the bucket cannot be read then, metrics.jsonl
is not copied until a later turn shows the bucket's copy is absent or a beginning of the local
file; otherwise it is left alone for this generation, and the next start merges it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Dict, Iterator, Optional, Tuple

from trainer.spend import SPEND_NAME, SpendRecord

log = logging.getLogger(__name__)
METRICS_NAME = "metrics.jsonl"
TENSORBOARD_NAME = "tensorboard"
# The last copy at a normal end (or a crash) may take this long; after a SIGTERM, what is left
# of the save deadline (less a second for the exit), at least MIN_FINAL_SECONDS.
FINAL_UPLOAD_SECONDS = 60.0
MIN_FINAL_SECONDS = 1.0
# How long rank 0 may spend reading the bucket's metrics.jsonl at start, before the fabric gate,
# while every other rank waits for it: a healthy store answers in well under a second.
SEED_SECONDS = 20.0


def local_path(path_or_uri: Optional[str]) -> Optional[str]:
    """A --metrics_file / --tensorboard_dir as a local path (they are paths or file:// URIs)."""
    if not path_or_uri:
        return None
    return path_or_uri[len("file://"):] if path_or_uri.startswith("file://") else path_or_uri


class TelemetryMirror:
    """Copies changed telemetry files from this machine to ``uri`` on a daemon thread."""

    def __init__(self, uri: str, metrics_file: Optional[str], tensorboard_dir: Optional[str],
                 every_seconds: float) -> None:
        self.uri = uri.rstrip("/")
        self.metrics_file = local_path(metrics_file)
        self.tensorboard_dir = local_path(tensorboard_dir)
        self.every_seconds = every_seconds
        self._sent: Dict[str, Tuple[int, int]] = {}  # local path -> (size, mtime_ns) uploaded
        self._made: set = set()  # remote folders made
        self._fs = None
        self._root = ""
        self._wake = threading.Event()
        self._stopping = False
        self._last_error = ""
        # Whether metrics.jsonl may be copied: True once the bucket's copy is known to be absent
        # or a beginning of the local file, False once it is known to hold records the local
        # file lacks (left alone until the next start merges them), None while unknown.
        self._history: Optional[bool] = None if self.metrics_file else True
        self.uploads = 0  # files uploaded, all syncs together
        self.sync_seconds = 0.0  # time the background thread spent copying
        self._thread = threading.Thread(target=self._loop, name="telemetry-mirror", daemon=True)
        self.spend: Optional[SpendRecord] = None  # set by start_mirror from the workload's env

    def start(self) -> "TelemetryMirror":
        """Take the bucket's earlier records into the local metrics file, then copy in the
        background. Call it before anything opens the local metrics file."""
        self.seed()
        self._thread.start()
        return self

    def seed(self, timeout: float = SEED_SECONDS) -> None:
        """Before the local metrics file is opened: unless it already begins with the bucket's
        copy, rewrite it as the bucket's records followed by what it has beyond them (a new
        shared file system starts empty; a generation whose bucket copy could not be checked
        copied nothing). The read is bounded by ``timeout``: rank 0 calls this before the fabric
        gate while the other ranks wait, so a hanging store leaves the history unknown (each
        turn checks it again) instead of holding the gang."""
        if self._history is not None:
            return
        read: Dict[str, object] = {}

        def fetch() -> None:
            try:
                read["remote"] = self._remote_metrics()
            except Exception as err:  # noqa: BLE001 (reported below)
                read["error"] = err

        reader = threading.Thread(target=fetch, name="telemetry-seed", daemon=True)
        reader.start()
        reader.join(timeout)
        if reader.is_alive() or "error" in read:
            why = (f"no answer in {timeout:g}s" if reader.is_alive()
                   else f"{type(read['error']).__name__}: {read['error']}")
            log.warning("telemetry: could not read %s/%s (%s): it is not copied until it "
                        "can be checked", self.uri, METRICS_NAME, why)
            return
        remote = read["remote"]
        assert self.metrics_file is not None and (remote is None or isinstance(remote, bytes))
        local = _read(self.metrics_file)
        merged = merge(remote, local)
        if merged != local:
            os.makedirs(os.path.dirname(os.path.abspath(self.metrics_file)), exist_ok=True)
            with open(self.metrics_file + ".part", "wb") as fh:
                fh.write(merged)
            os.replace(self.metrics_file + ".part", self.metrics_file)
            log.warning("telemetry: %d earlier records taken from %s/%s into %s",
                        (remote or b"").count(b"\n"), self.uri, METRICS_NAME, self.metrics_file)
        self._history = True

    def _remote_metrics(self) -> Optional[bytes]:
        """The bucket's metrics.jsonl, or None when there is none."""
        self._open()
        assert self._fs is not None
        try:
            return self._fs.cat_file(f"{self._root}/{METRICS_NAME}")
        except FileNotFoundError:
            return None

    def _open(self) -> None:
        if self._fs is None:
            from trainer.checkpoint import open_store  # the stores' own setup and identity

            self._fs, self._root = open_store(self.uri)

    def _check_history(self) -> bool:
        """In a turn, once the local file is being written: may metrics.jsonl be copied?"""
        if self._history is None:
            assert self.metrics_file is not None
            remote = self._remote_metrics()
            self._history = remote is None or _read(self.metrics_file).startswith(remote)
            if not self._history:
                log.warning("telemetry: %s/%s holds records that %s lacks (the bucket could not "
                            "be read at start): it is not overwritten; the next start merges them",
                            self.uri, METRICS_NAME, self.metrics_file)
        return self._history

    def request(self) -> None:
        """Copy now rather than at the next interval (e.g. a checkpoint was just started)."""
        self._wake.set()

    def close(self, timeout: float) -> bool:
        """One last copy of everything changed, then stop; waits at most ``timeout`` seconds.
        True when the last copy finished in time."""
        self._stopping = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def _loop(self) -> None:
        while True:
            self._wake.wait(self.every_seconds)
            self._wake.clear()
            stopping = self._stopping  # read before the copy: a close() during it copies again
            self.sync()
            if stopping:
                return

    def _files(self) -> Iterator[Tuple[str, str]]:
        """(local path, path under the mirror's root) of every file to mirror."""
        if self.metrics_file and os.path.isfile(self.metrics_file):
            yield self.metrics_file, METRICS_NAME
        if self.tensorboard_dir and os.path.isdir(self.tensorboard_dir):
            for folder, _, names in os.walk(self.tensorboard_dir):
                for name in sorted(names):
                    path = os.path.join(folder, name)
                    rel = os.path.relpath(path, self.tensorboard_dir).replace(os.sep, "/")
                    yield path, f"{TENSORBOARD_NAME}/{rel}"

    def sync(self) -> int:
        """Upload every file changed since its last upload; returns how many were sent. Errors
        are logged (once per distinct error) and the file is tried again next time."""
        started = time.perf_counter()
        sent = 0
        try:
            self._open()
            for path, rel in self._files():
                stat = os.stat(path)
                mark = (stat.st_size, stat.st_mtime_ns)
                if self._sent.get(path) == mark:
                    continue
                if rel == METRICS_NAME and not self._check_history():
                    continue
                with open(path, "rb") as fh:
                    data = fh.read(stat.st_size)
                if rel == METRICS_NAME:  # a line being written is left for the next copy
                    data = data[: data.rfind(b"\n") + 1]
                self._put(f"{self._root}/{rel}", data)
                self._sent[path] = mark
                sent += 1
            if self.spend is not None:  # the job's own spend record (trainer/spend.py)
                if not self.spend.seeded:
                    try:
                        self.spend.seed(self._fs.cat_file(f"{self._root}/{SPEND_NAME}"))
                    except FileNotFoundError:
                        self.spend.seed(None)
                self._put(f"{self._root}/{SPEND_NAME}", self.spend.snapshot())
            if self._last_error:
                log.warning("telemetry: copies to %s work again", self.uri)
                self._last_error = ""
        except Exception as err:  # noqa: BLE001 (a store error must never stop training)
            message = f"{type(err).__name__}: {err}"
            if message != self._last_error:
                log.warning("telemetry: could not copy to %s (%s); retrying every %gs",
                            self.uri, message, self.every_seconds)
            self._last_error = message
        self.uploads += sent
        self.sync_seconds += time.perf_counter() - started
        return sent

    def _put(self, remote: str, data: bytes) -> None:
        from fsspec.implementations.local import LocalFileSystem

        assert self._fs is not None
        parent = remote.rsplit("/", 1)[0]
        if parent not in self._made:
            self._fs.makedirs(parent, exist_ok=True)
            self._made.add(parent)
        if isinstance(self._fs, LocalFileSystem):  # a reader never sees a half-written copy
            self._fs.pipe_file(remote + ".part", data)
            os.replace(remote + ".part", remote)
        else:  # an object PUT is atomic: readers see the old object or the new one
            self._fs.pipe_file(remote, data)


def merge(remote: Optional[bytes], local: bytes) -> bytes:
    """The local metrics file with the bucket's records first, each record once.

    The bucket's copy was made from a local file, so the two share a beginning: the whole bucket
    copy when the local file only grew since (kept as it is), or the local file's first lines
    when it lost writes the bucket already had (a killed node's unflushed tail: bucket 1-4,
    local 1-3). Merge from their longest common beginning that ends at a line: the bucket's copy,
    then what the local file has beyond that beginning, less a torn last line that is only the
    start of a record the bucket holds. Nothing in common (a new, empty file system): the
    bucket's records, then the local ones."""
    if not remote or local.startswith(remote):
        return local
    if not remote.endswith(b"\n"):  # copies end at a complete line; never glue two records
        remote += b"\n"
    common = os.path.commonprefix([remote, local])
    shared = common[: common.rfind(b"\n") + 1]  # whole lines only
    beyond = local[len(shared):]
    if b"\n" not in beyond and remote[len(shared):].startswith(beyond):
        beyond = b""  # a torn write of a record the bucket already has
    return remote + beyond


def _read(path: str) -> bytes:
    """A local file's bytes; empty when it does not exist."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return b""


def start_mirror(telemetry_dir: str, metrics_file: Optional[str],
                 tensorboard_dir: Optional[str], every_seconds: float,
                 rank: int) -> Optional[TelemetryMirror]:
    """Rank 0's mirror, started; None on other ranks or without --telemetry_dir."""
    if rank != 0 or not telemetry_dir:
        return None
    mirror = TelemetryMirror(telemetry_dir, metrics_file, tensorboard_dir, every_seconds)
    mirror.spend = SpendRecord.from_env()
    return mirror.start()


def final_upload_seconds(seconds_left: float) -> float:
    """How long the last copy may take, given the seconds left before the process must have
    exited (inf without a SIGTERM)."""
    return min(FINAL_UPLOAD_SECONDS, max(MIN_FINAL_SECONDS, seconds_left - 1.0))
