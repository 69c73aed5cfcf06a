"""Checkpoints with torch.distributed.checkpoint (DCP) on a path or an fsspec URI.

Layout: ``<checkpoint_dir>/step-<N>/``. DCP writes ``.metadata`` last, so it is the
commit marker: a directory without it (a save cut short by preemption) is ignored and
never loaded. Saves never overwrite a complete checkpoint; the newest ``keep`` complete
ones are kept.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Dict, List, Optional

import fsspec
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter
from torch.distributed.checkpoint._fsspec_filesystem import FsspecReader, FsspecWriter

log = logging.getLogger(__name__)
_STEP_DIR = re.compile(r"^step-(\d+)$")


class Checkpointer:
    """Save/restore a state dict of Stateful-like parts at step boundaries."""

    def __init__(self, uri: str, keep: int) -> None:
        self.uri = uri.rstrip("/")
        self.keep = keep
        # Any URI (file:// included) goes through fsspec; a plain path uses DCP's file writer.
        self.remote = "://" in uri
        self.fs, self.root = fsspec.core.url_to_fs(self.uri)

    def _path(self, step: int) -> str:
        return f"{self.uri}/step-{step}" if self.remote else f"{self.root}/step-{step}"

    def _is_complete(self, step: int) -> bool:
        return self.fs.exists(f"{self.root}/step-{step}/.metadata")

    def complete_steps(self) -> List[int]:
        """Steps of complete checkpoints, oldest first."""
        self.fs.invalidate_cache()  # object-store listings are cached per process; others write too
        if not self.fs.exists(self.root):
            return []
        steps = []
        for entry in self.fs.ls(self.root, detail=False):
            match = _STEP_DIR.match(entry.rstrip("/").rsplit("/", 1)[-1])
            if match and self._is_complete(int(match.group(1))):
                steps.append(int(match.group(1)))
        return sorted(steps)

    def latest(self) -> Optional[int]:
        """Newest complete step, decided on rank 0 and broadcast so all ranks agree."""
        found: List[Optional[int]] = [None]
        if dist.get_rank() == 0:
            steps = self.complete_steps()
            found = [steps[-1] if steps else None]
        if dist.get_world_size() > 1:
            dist.broadcast_object_list(found, src=0)
        return found[0]

    def save(self, step: int, state: Dict[str, Any]) -> bool:
        """Collective. Returns False if a complete checkpoint for ``step`` already exists."""
        exists = [self._is_complete(step)] if dist.get_rank() == 0 else [None]
        if dist.get_world_size() > 1:
            dist.broadcast_object_list(exists, src=0)
        if exists[0]:
            return False
        path = self._path(step)
        if dist.get_rank() == 0 and self.fs.exists(f"{self.root}/step-{step}"):
            self.fs.rm(f"{self.root}/step-{step}", recursive=True)  # leftover of a cut-short save
        if dist.get_world_size() > 1:
            dist.barrier()
        writer = FsspecWriter(path) if self.remote else FileSystemWriter(path)
        dcp.save(state, storage_writer=writer)
        if dist.get_rank() == 0:
            self._prune()
        return True

    def load(self, step: int, state: Dict[str, Any]) -> None:
        """Collective, in place: tensors in ``state`` receive the saved values."""
        path = self._path(step)
        reader = FsspecReader(path) if self.remote else FileSystemReader(path)
        dcp.load(state, storage_reader=reader)

    def _prune(self) -> None:
        for step in self.complete_steps()[: -self.keep]:
            try:
                self.fs.rm(f"{self.root}/step-{step}", recursive=True)
            except OSError as err:  # another process may be listing it; try again next save
                log.warning("could not remove old checkpoint step-%d: %s", step, err)
