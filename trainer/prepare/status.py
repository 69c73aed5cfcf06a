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
  file is the Job's last word. Removed at the start of every run.
"""

from __future__ import annotations

import json
import os
from typing import Optional

RUN_ID_ENV = "PREPARE_RUN_ID"
FAILED_FILE = "prepare-failed.json"


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
        with open(failed_path(output) + ".tmp", "w") as fh:
            json.dump(body, fh, indent=1)
        os.replace(failed_path(output) + ".tmp", failed_path(output))
    except OSError as err:
        print(f"prepare: could not record the failure in {failed_path(output)}: {err}", flush=True)
