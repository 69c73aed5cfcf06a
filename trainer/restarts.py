"""The bound on resumes that make no progress: how many generations in a row started from the
same checkpoint.

An NCCL watchdog abort (SIGABRT) usually means a lost peer or a broken link, so the launcher
asks the gang to resume without using the retry budget (trainer/launch.py). A real bug can end
in SIGABRT too (a failed CHECK in a C++ library, std::terminate), and would then restart for
ever, each time from the same checkpoint. So rank 0 records, in ``STARTS_FILE`` beside the
checkpoints, the checkpoint each generation started from and how many generations in a row
started there; after an abort the launcher reads it and counts the failure as a crash once
``STARTS_WITHOUT_PROGRESS`` generations started from the same checkpoint. Any new checkpoint
(periodic, or the save a SIGTERM makes) resets the count, so a job that keeps making progress
between faults is never charged for them.

One writer per generation (rank 0, once, at start) and every launcher reads the same value
after the failure, so all pods of a gang reach the same verdict. Without --checkpoint_dir there
is no record and aborts always resume (a run without checkpoints restarts from step 0 anyway).
"""

from __future__ import annotations

import json
import logging
from typing import Any, Dict, Optional, Tuple

import fsspec

log = logging.getLogger(__name__)
STARTS_FILE = "starts.json"
# Generations in a row that started from one checkpoint before an abort counts as a crash:
# two resumes from the same point are what a flaky link or one lost node costs; a third abort
# there is more likely the program's own.
STARTS_WITHOUT_PROGRESS = 3


def _path(checkpoint_dir: str) -> Tuple[fsspec.AbstractFileSystem, str]:
    from trainer.checkpoint import open_store

    fs, root = open_store(checkpoint_dir.rstrip("/"))
    return fs, f"{root}/{STARTS_FILE}"


def _read(fs: fsspec.AbstractFileSystem, path: str) -> Dict[str, Any]:
    try:
        with fs.open(path, "r") as fh:
            record = json.load(fh)
        return record if isinstance(record, dict) else {}
    except (OSError, ValueError):  # no record yet, or one cut short
        return {}


def record_start(checkpoint_dir: str, step: Optional[int]) -> int:
    """Rank 0, once per generation: this generation starts from checkpoint ``step`` (None: from
    scratch). Returns how many generations in a row started from it, this one included."""
    fs, path = _path(checkpoint_dir)
    previous = _read(fs, path)
    starts = int(previous.get("starts", 0)) + 1 if previous.get("step", -1) == step else 1
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    with fs.open(path, "w") as fh:
        json.dump({"step": step, "starts": starts}, fh)
    return starts


def starts_without_progress(checkpoint_dir: Optional[str]) -> int:
    """Generations in a row that started from the newest recorded checkpoint (0: unknown)."""
    if not checkpoint_dir:
        return 0
    try:
        fs, path = _path(checkpoint_dir)
        return int(_read(fs, path).get("starts", 0))
    except Exception as err:  # noqa: BLE001 (an unreachable store must not turn a resume into a crash)
        log.warning("could not read %s in %s: %s", STARTS_FILE, checkpoint_dir, err)
        return 0
