"""The trainer flags the stack itself passes (workloads/flags.py), and the shape of a flag name.

Below both the rules (trainerArgs may not set these: infra/settings/rules.py) and the trainer's
own judgement of job.trainerArgs (infra/settings/trainer_flags.py), so neither imports the other
for it. To add a stack-owned flag: a line here, and its value in workloads/flags.py.
"""

from __future__ import annotations

import re

TRAINER_FLAG = re.compile(r"^[a-z][a-z0-9_]*$")
# Every flag the stack passes the trainer (workloads/flags.py), with the setting that decides
# it, or None where the catalog or the cluster alone decides it. The one list: workloads/ reads
# it (infra may not import workloads), trainerArgs refuses each key in it, since the stack's
# value comes last on the command line and silently wins.
WORKLOAD_OWNED_FLAGS: dict[str, tuple[str, str | None]] = {
    "checkpoint_dir": ("checkpoints.location", "checkpoints.location"),
    "checkpoint_every": ("checkpoints.everySteps", "checkpoints.everySteps"),
    # workloads/flags.py passes checkpoints.everySeconds on the spot pool only: on-demand
    # nodes get no forced stop, so time-based saves there would only cost time.
    "checkpoint_every_seconds": ("checkpoints.everySeconds on the spot pool and 0 on the "
                                 "on-demand pool (time-based saves are for spot pools, whose "
                                 "notice may not fit a save)", "checkpoints.everySeconds"),
    "keep_checkpoints": ("checkpoints.keep", "checkpoints.keep"),
    "save_deadline_seconds": ("the cloud's notice (infra/catalog/stop_notices.py)", None),
    "checkpoint_write_mb_per_sec": ("the checkpoint store (infra/catalog/storage.py)", None),
    "dataset_path": ("dataset.path", "dataset.path"),
    "metrics_file": ("the shared file system (<mount>/runs/<job.name>/metrics.jsonl)",
                     "job.name"),
    "tensorboard_dir": ("the shared file system (<mount>/runs/<job.name>/tensorboard)",
                        "job.name"),
    "telemetry_dir": ("the checkpoint store (<checkpoint_uri>/telemetry)", None),
    "fabric_gate": ("interconnect.gate", "interconnect.gate"),
    "fabric_transport": ("interconnect.fabric and the machine (infra/catalog/machines.py)",
                         "interconnect.fabric"),
    "fabric_floor_gbps": ("the machine (infra/catalog/gate_floors.py)", None),
    "fabric_all_to_all_floor_gbps": ("the machine (infra/catalog/gate_floors.py)", None),
    "fabric_gate_sizes": ("the machine's published figures (infra/catalog/gate_floors.py)", None),
    "fabric_rails": ("the cloud's interconnect (EFA interfaces, InfiniBand HCAs)", None),
    "fabric_max_nodes_left_out": ("job.nodes", "job.nodes"),
    "fabric_nccl_version": ("the NCCL of the image the stack builds (none with job.image)",
                            "job.image"),
    "gpu_matmul_floor_tflops": ("the machine's GPU (infra/catalog/gate_floors.py)", None),
    "hbm_gb_per_sec": ("the machine's GPU memory (infra/catalog/gpus.py)", None),
    "intra_host_gb_per_sec": ("the machine's NVLink (infra/catalog/gpus.py)", None),
    "inter_host_gb_per_sec": ("the machine's network between nodes (infra/catalog/machines.py)", None),
}
