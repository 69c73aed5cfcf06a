"""The job's own spend, kept by rank 0 beside its telemetry: ``<telemetry_dir>/spend.json``.

The workload sets the job's node count, capacity (spot / on-demand) and the catalog's price per
node-hour in the environment (workloads/spend.py). Each generation of the gang adds one segment,
from the trainer's start to its latest copy; the node-hours are the segments' hours times the
nodes, the cost that times the price. Written by the telemetry mirror's thread
(trainer/telemetry.py) on each turn and on the way out, so the record survives the pools'
scale-down and `pulumi destroy` (the bucket is kept). Not counted: the minutes between Kueue's
admission and the trainer's start (node start, image pull) and a killed pod's last minute before
its final copy: the record is a floor, not an invoice.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Mapping, Optional

SPEND_NAME = "spend.json"


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _seconds(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


class SpendRecord:
    """One job's segments and what they cost; ``clock`` is injectable for tests."""

    def __init__(self, job: str, nodes: int, capacity: str, usd_per_node_hour: float,
                 gpus_per_node: int = 0, clock: Callable[[], float] = time.time) -> None:
        self.job, self.nodes, self.capacity = job, nodes, capacity
        self.gpus_per_node = gpus_per_node
        self.usd_per_node_hour = usd_per_node_hour
        self.clock = clock
        self.started = clock()
        self.earlier: List[Dict[str, Any]] = []
        self.seeded = False

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ,
                 clock: Callable[[], float] = time.time) -> Optional["SpendRecord"]:
        """None without the workload's variables (a local run)."""
        try:
            return cls(env["TORCHREC_JOB_NAME"], int(env["TORCHREC_JOB_NODES"]),
                       env["TORCHREC_JOB_CAPACITY"], float(env["TORCHREC_NODE_USD_PER_HOUR"]),
                       int(env.get("TORCHREC_NODE_GPUS", "0")), clock)
        except (KeyError, ValueError):
            return None

    def seed(self, earlier: Optional[bytes]) -> None:
        """Take the earlier generations' segments from the bucket's copy."""
        self.seeded = True
        if not earlier:
            return
        try:
            self.earlier = list(json.loads(earlier).get("segments", []))
        except (ValueError, AttributeError):
            self.earlier = []

    def record(self) -> Dict[str, Any]:
        segments = [*self.earlier, {"start": _iso(self.started), "end": _iso(self.clock()),
                                    "nodes": self.nodes, "gpus_per_node": self.gpus_per_node,
                                    "capacity": self.capacity,
                                    "usd_per_node_hour": self.usd_per_node_hour}]
        node_hours = sum((_seconds(s["end"]) - _seconds(s["start"])) / 3600 * s["nodes"]
                         for s in segments)
        usd = sum((_seconds(s["end"]) - _seconds(s["start"])) / 3600 * s["nodes"]
                  * s["usd_per_node_hour"] for s in segments)
        gpu_hours = sum((_seconds(s["end"]) - _seconds(s["start"])) / 3600 * s["nodes"]
                        * s.get("gpus_per_node", 0) for s in segments)
        return {"job": self.job, "segments": segments, "node_hours": round(node_hours, 4),
                "gpu_hours": round(gpu_hours, 4),
                "usd": round(usd, 2), "updated": segments[-1]["end"]}

    def snapshot(self) -> bytes:
        return (json.dumps(self.record(), indent=1) + "\n").encode()
