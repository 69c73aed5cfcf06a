"""How a preparation tells the training pods it has ended, through the shared file system.

The training pods cannot ask the API server (their service account token is not mounted), so
the preparation leaves its verdict beside its output, stamped with the run that wrote it: the
Job's uid, which the pod reads from its own `batch.kubernetes.io/controller-uid` label
(workloads/prepare.py, through the downward API). The training pods' wait (the same module)
knows that uid too, so a `layout.json` or a failure left by an earlier run is never taken for
this run's.

- success: `layout.json` (trainer/data/layout.py) with `"run_id": "<uid>"`, written last;
- failure that no retry can mend: `prepare-failed.json` with the run id, the exit status and
  the error's last line. The Job fails at once on those statuses (its podFailurePolicy), so the
  file is the Job's last word. Removed at the start of every run;
- alive: `prepare-heartbeat.json` with the run id, rewritten every HEARTBEAT_SECONDS while the
  process runs (its mtime is the beat), so a run killed without a word (out of memory, past its
  deadline) is told from a slow one.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Optional

from trainer.prepare.jsonfile import write_json

RUN_ID_ENV = "PREPARE_RUN_ID"
FAILED_FILE = "prepare-failed.json"
HEARTBEAT_FILE = "prepare-heartbeat.json"
HEARTBEAT_SECONDS = 60


def run_id() -> Optional[str]:
    """This run's id in a Job; None when run by hand."""
    return os.environ.get(RUN_ID_ENV) or None


def failed_path(output: str) -> str:
    return os.path.join(output, FAILED_FILE)


def clear_failure(output: str) -> None:
    """A new run starts with no verdict."""
    try:
        os.remove(failed_path(output))
    except FileNotFoundError:
        pass


def record_failure(output: str, exit_status: int, error: str) -> None:
    """Best effort: a run that cannot write its output folder cannot write this either, and the
    training pods' wait then ends at the Job's deadline instead."""
    body = {"run_id": run_id(), "exit_status": exit_status, "error": error}
    try:
        os.makedirs(output, exist_ok=True)
        write_json(failed_path(output), body, indent=1)
    except OSError as err:
        print(f"prepare: could not record the failure in {failed_path(output)}: {err}", flush=True)


class Heartbeat:
    """A daemon thread that rewrites the heartbeat file every `every` seconds until stopped."""

    def __init__(self, output: str, every: float = HEARTBEAT_SECONDS) -> None:
        self.path = os.path.join(output, HEARTBEAT_FILE)
        self.every = every
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="prepare-heartbeat", daemon=True)

    def __enter__(self) -> "Heartbeat":
        self.beat()
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)

    def beat(self) -> None:
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            write_json(self.path, {"run_id": run_id(), "pid": os.getpid(), "at": time.time()})
        except OSError as err:  # a full or flaky file system: the run itself will say more
            print(f"prepare: heartbeat not written to {self.path}: {err}", flush=True)

    def _run(self) -> None:
        while not self.stopped.wait(self.every):
            self.beat()
