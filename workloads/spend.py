"""What a job's nodes cost, handed to the trainer so rank 0 can keep the record itself
(trainer/spend.py writes `<telemetry_dir>/spend.json`): the record then survives the pools'
scale-down and `pulumi destroy`, which a count of live nodes does not."""

from __future__ import annotations

# The environment the workload sets on the trainer container (read by trainer/spend.py).
SPEND_ENV = ("TORCHREC_JOB_NAME", "TORCHREC_JOB_NODES", "TORCHREC_JOB_CAPACITY",
             "TORCHREC_NODE_USD_PER_HOUR", "TORCHREC_NODE_GPUS")


def spend_env(job_name: str, nodes: int, capacity: str, usd_per_node_hour: float,
              gpus_per_node: int) -> dict[str, str]:
    """capacity: "spot" or "on-demand"; the price is the catalog's for that capacity."""
    return dict(zip(SPEND_ENV, (job_name, str(nodes), capacity, f"{usd_per_node_hour:g}",
                                str(gpus_per_node))))
