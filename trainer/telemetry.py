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
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Dict, Iterator, Optional, Tuple

log = logging.getLogger(__name__)
METRICS_NAME = "metrics.jsonl"
TENSORBOARD_NAME = "tensorboard"
# The last copy at a normal end (or a crash) may take this long; after a SIGTERM, what is left
# of the save deadline (less a second for the exit), at least MIN_FINAL_SECONDS.
FINAL_UPLOAD_SECONDS = 60.0
MIN_FINAL_SECONDS = 1.0


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
        self.uploads = 0  # files uploaded, all syncs together
        self.sync_seconds = 0.0  # time the background thread spent copying
        self._thread = threading.Thread(target=self._loop, name="telemetry-mirror", daemon=True)

    def start(self) -> "TelemetryMirror":
        self._thread.start()
        return self

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
            if self._fs is None:
                from trainer.checkpoint import open_store  # the stores' own setup and identity

                self._fs, self._root = open_store(self.uri)
            for path, rel in self._files():
                stat = os.stat(path)
                mark = (stat.st_size, stat.st_mtime_ns)
                if self._sent.get(path) == mark:
                    continue
                with open(path, "rb") as fh:
                    data = fh.read(stat.st_size)
                if rel == METRICS_NAME:  # a line being written is left for the next copy
                    data = data[: data.rfind(b"\n") + 1]
                self._put(f"{self._root}/{rel}", data)
                self._sent[path] = mark
                sent += 1
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


def start_mirror(telemetry_dir: str, metrics_file: Optional[str],
                 tensorboard_dir: Optional[str], every_seconds: float,
                 rank: int) -> Optional[TelemetryMirror]:
    """Rank 0's mirror, started; None on other ranks or without --telemetry_dir."""
    if rank != 0 or not telemetry_dir:
        return None
    return TelemetryMirror(telemetry_dir, metrics_file, tensorboard_dir, every_seconds).start()


def final_upload_seconds(seconds_left: float) -> float:
    """How long the last copy may take, given the seconds left before the process must have
    exited (inf without a SIGTERM)."""
    return min(FINAL_UPLOAD_SECONDS, max(MIN_FINAL_SECONDS, seconds_left - 1.0))
