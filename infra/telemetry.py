"""Where the trainer's telemetry mirror lives in the checkpoint bucket, and how long the bucket
keeps the copies it overwrites.

Rank 0 copies its metrics.jsonl and TensorBoard event files whole to
``<checkpoint_uri>/telemetry/`` every ``--telemetry_every_seconds`` (trainer/telemetry.py;
workloads/flags.py passes the flag). On the versioned S3 and GCS buckets each copy turns the
previous one into a noncurrent version; kept for the checkpoints' week, a growing file copied
every minute would leave a week of ever longer copies behind (stored bytes growing with the
square of the run's length). The bucket rules expire this folder's noncurrent versions after
a day instead: nobody restores an old copy of a file that only grows.
"""

from __future__ import annotations

TELEMETRY_FOLDER = "telemetry"  # <checkpoint_uri>/telemetry/: metrics.jsonl and tensorboard/
TELEMETRY_NONCURRENT_DAYS = 1  # the shortest a lifecycle rule allows (S3 and GCS count days)


def telemetry_key_prefix(job_name: str) -> str:
    """The object key prefix of the mirror in the checkpoint bucket (checkpoint_uri is
    ``<scheme>://<bucket>/<job.name>``)."""
    return f"{job_name}/{TELEMETRY_FOLDER}/"
