"""`checkpoints`: where the trainer saves, how often, and what `pulumi destroy` keeps."""

from __future__ import annotations

from enum import Enum

from pydantic import Field

from infra.settings.model.section import Section


class CheckpointLocation(str, Enum):
    OBJECT_STORE = "objectStore"
    SHARED_FILE_SYSTEM = "sharedFileSystem"


class Checkpoints(Section):
    """Where the trainer saves, and what `pulumi destroy` keeps."""

    enabled: bool = Field(True, description="Save checkpoints (required with a spot pool).")
    location: CheckpointLocation = Field(
        CheckpointLocation.OBJECT_STORE,
        description="objectStore (s3://, az://, gs:// bucket) or sharedFileSystem.",
    )
    retain_on_destroy: bool = Field(
        True, description="Keep the checkpoint bucket and its data on `pulumi destroy`."
    )
    every_steps: int | None = Field(
        None, ge=1,
        description="Steps between checkpoints. Unset: derived from one save's time so that a "
        "save is written at most 10% of the run (at the planned steps per second; 500 at "
        "least); a value under that bound is refused (infra/cadence.py).")
    every_seconds: int | None = Field(
        None, ge=0,
        description="On spot pools, also save when this many seconds passed since the last "
        "save (0 = steps only): bounds the work a preemption without a final save loses. "
        "Unset: 600, or 10 x one save's time where that is longer.")
    keep: int = Field(3, ge=1, description="Newest complete checkpoints to keep.")
    accept_preemption_loss: bool = Field(
        False,
        description="On a spot pool whose tables are too large to save within the cloud's "
        "notice (MLPerf's 209 GB), run anyway: a preemption then loses up to one checkpoint "
        "interval (everySeconds), which `make check` prints. False: such a stack is refused.")
