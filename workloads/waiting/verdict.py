"""The answer's shape: `Kind` names every answer (the order they are tried in is `RULES` in
decide.py, not this list's), and `Verdict` carries one of them with its plain-language reason,
the event, condition or object it came from, and the next step; every evidence module returns
one."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Kind(str, Enum):
    """The answers a user can get (a new waiting reason adds its name here)."""

    NOT_FOUND = "not found"
    COMPLETED = "completed"
    FAILED = "failed"
    RUNNING = "running"
    IMAGE_PULL = "image pull failing"
    HELD = "held by Kueue"
    REQUEUED = "requeued after a timeout"
    ADMISSION = "waiting for admission"
    SUSPENDED = "suspended"
    NO_QUOTA = "no quota"
    NO_CAPACITY = "no capacity"
    SCALE_UP_FAILED = "scale-up failed"
    NO_SCALE_UP = "autoscaler will not scale up"
    NODE_LEFT_OUT = "node left out"
    SCALING_UP = "waiting for a node"
    UNSCHEDULABLE = "unschedulable"
    PREPARING = "dataset preparation running"
    STARTING = "starting"


@dataclass(frozen=True)
class Verdict:
    kind: Kind
    reason: str  # one plain sentence
    evidence: str  # the event, condition or object it came from
    next_step: str
