"""How long a stop may take, derived in one place from the cloud's notice (infra/catalog/stop_notices.py).

A spot node's notice is fixed by the cloud; the pod's grace, torchrun's shutdown timeout and
the trainer's save deadline must nest inside it, each leaving the next layer time to exit:

    notice ─ delivery ─> pod grace (SIGTERM .. SIGKILL, the kubelet)
                           └─ torchrun --shutdown_timeout (SIGTERM to workers .. SIGKILL)
                                └─ trainer --save_deadline_seconds (save only if it fits)

On-demand pools have no forced stop: drains honour ``job.terminationGraceSeconds``.
The same module estimates how long one checkpoint save takes, so the settings can refuse a
spot setup whose save cannot fit its notice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from infra.catalog.cloud import Cloud
from infra.catalog.stop_notices import Capacity, StopNotice, stop_notice
from infra.catalog.storage import (ANF_MIB_S_PER_TIB, FILESTORE_WRITE_MB_S,
                                   FSX_SCRATCH_2_MB_S_PER_TIB, checkpoint_store_speed)

if TYPE_CHECKING:
    from infra.settings.model.shared_file_system import SharedFileSystem
    from infra.settings.model.stack_file import Settings

LAUNCHER_EXIT_SECONDS = 2  # the launcher reports its status after torchrun's workers are gone
WORKER_EXIT_SECONDS = 3  # the trainer leaves its deadline this long before torchrun's SIGKILL
MIB = 1024 * 1024
MB = 1000 * 1000


@dataclass(frozen=True)
class StopBudget:
    """The three nested timeouts of one pool, in seconds."""

    notice: StopNotice
    pod_grace_seconds: int
    shutdown_timeout_seconds: int
    save_deadline_seconds: int


def stop_budget(cloud: Cloud | str, spot: bool, planned_grace_seconds: int,
                kubernetes_version: str | None = None) -> StopBudget:
    """The timeouts for a pool of ``cloud`` on ``kubernetes_version``; ``planned_grace_seconds``
    applies without a forced stop (on-demand)."""
    notice = stop_notice(cloud, Capacity.SPOT if spot else Capacity.ON_DEMAND, kubernetes_version)
    grace = notice.pod_seconds if notice.pod_seconds is not None else planned_grace_seconds
    shutdown = max(1, grace - LAUNCHER_EXIT_SECONDS)
    return StopBudget(notice=notice, pod_grace_seconds=grace, shutdown_timeout_seconds=shutdown,
                      save_deadline_seconds=max(1, shutdown - WORKER_EXIT_SECONDS))


@dataclass(frozen=True)
class SaveEstimate:
    """One checkpoint: its bytes, the write throughput the store offers all ranks together,
    and what the fullest rank writes at what one stream moves. Every rank writes its own file:
    the save lasts until the store has taken every byte and the fullest rank has written its
    own (an object store's stream speed bounds that; a shared file system's throughput is the
    only limit there)."""

    bytes: int
    mb_per_second: float
    store: str
    largest_rank_bytes: int = 0
    stream_mb_per_second: float | None = None

    @property
    def seconds(self) -> float:
        whole = self.bytes / MB / self.mb_per_second
        if self.stream_mb_per_second is None:
            return whole
        return max(whole, self.largest_rank_bytes / MB / self.stream_mb_per_second)


# The trainer flags the table sizes are computed from: where one of them is refused, a rule
# that needs the sizes has nothing to judge (the flag's own rule names it).
TABLE_FLAGS = ("recipe", "num_embeddings", "num_embeddings_per_feature", "embedding_dim",
               "optimizer", "data_parallel_max_mb")


def _tables(trainer_args: dict[str, object]) -> tuple[list[int], int, str, float]:
    """Rows per table, width, optimizer and the data-parallel rule of the job's trainer
    arguments, with the trainer's own defaults (trainer/config.py) under a --recipe's values
    (trainer/recipe.py); each value as the trainer's parser reads it (`1,2,3` is a list)."""
    from infra.settings.trainer_flags import trainer_flags_in_effect
    from trainer.config import NUM_SPARSE_FEATURES  # plain: no torch import

    flags = trainer_flags_in_effect(trainer_args)  # type: ignore[arg-type]
    per_feature = flags.get("num_embeddings_per_feature")
    if isinstance(per_feature, list) and per_feature:
        rows = [int(r) for r in per_feature]
    else:
        rows = [int(flags["num_embeddings"])] * NUM_SPARSE_FEATURES
    dim = int(flags["embedding_dim"])
    optimizer = str(flags["optimizer"])
    max_mb = float(flags["data_parallel_max_mb"])
    return rows, dim, optimizer, max_mb


def checkpoint_bytes(trainer_args: dict[str, object]) -> int:
    """Embedding weights (fp32) and Adagrad's state (one value per row of a sharded table, full
    size for a data-parallel one, trainer/sizing.py); dense layers are megabytes beside them."""
    from trainer.sizing import checkpoint_bytes as table_bytes

    return table_bytes(*_tables(trainer_args))


def largest_rank_bytes(trainer_args: dict[str, object], ranks: int, ranks_per_node: int,
                       machine: str | None = None) -> int:
    """What the fullest rank writes: torchrec's planner's own figure where it is recorded for
    this machine type, node count and batch (the sizing advisor prints the same one), else a
    bound under the trainer's sharding rule (torch-free: trainer/sizing.py)."""
    from infra.settings.trainer_flags import trainer_flags_in_effect
    from trainer.sizing import fullest_rank_checkpoint_bytes

    flags = trainer_flags_in_effect(trainer_args)  # type: ignore[arg-type]
    batch = int(flags.get("global_batch_size") or 0) // max(ranks, 1) or int(flags["batch_size"])
    return fullest_rank_checkpoint_bytes(*_tables(trainer_args), ranks, ranks_per_node,
                                         machine, batch)


def object_store_mb_s(cloud: Cloud | str, streams: int) -> tuple[float, str]:
    speed = checkpoint_store_speed(cloud)
    total = speed.object_store_mb_s_per_stream * streams
    if speed.object_store_mb_s_per_account is not None:
        total = min(total, speed.object_store_mb_s_per_account)
    return total, f"{streams} streams x {speed.object_store_mb_s_per_stream:.0f} MB/s"


def shared_file_system_mb_s(fs: "SharedFileSystem") -> tuple[float, str]:
    """The provisioned write throughput of the stack's shared file system."""
    from infra.settings.model.shared_file_system import AzureNetAppFiles, FsxLustre

    if isinstance(fs, FsxLustre):
        per_tib = fs.throughput_per_tib or FSX_SCRATCH_2_MB_S_PER_TIB
        tib = fs.capacity_gib / 1024
        return per_tib * tib, f"FSx {per_tib} MB/s/TiB x {tib:g} TiB"
    if isinstance(fs, AzureNetAppFiles):
        level = fs.service_level.value
        tib = fs.volume_size_gib / 1024
        return ANF_MIB_S_PER_TIB[level] * tib * MIB / MB, f"ANF {level} x {tib:g} TiB"
    return float(FILESTORE_WRITE_MB_S[fs.tier.value]), f"Filestore {fs.tier.value}"


def estimated_save(settings: "Settings") -> SaveEstimate:
    """One checkpoint of the stack's job against the write throughput of where it saves (object
    store or shared file system, infra/catalog/storage.py), with the fullest rank's share."""
    from infra.settings.model.checkpoints import CheckpointLocation

    job = settings.job
    args = dict(job.trainer_args)
    ranks = job.nodes * job.processes_per_node
    fullest = largest_rank_bytes(args, ranks, job.processes_per_node,
                                 settings.job_pool.machine_type)
    if settings.checkpoints.location == CheckpointLocation.OBJECT_STORE:
        return object_store_save(settings.cloud, ranks, checkpoint_bytes(args), fullest)
    rate, how = shared_file_system_mb_s(settings.shared_file_system)
    return SaveEstimate(bytes=checkpoint_bytes(args), mb_per_second=rate, store=how,
                        largest_rank_bytes=fullest)


def object_store_save(cloud: Cloud | str, ranks: int, total_bytes: int,
                      fullest_rank_bytes: int) -> SaveEstimate:
    """A save to the cloud's object store, every rank one stream: what the stack's cadence and
    the sizing advisor (torchrec_cloud/plan.py) both time a save with."""
    rate, how = object_store_mb_s(cloud, ranks)
    stream = min(checkpoint_store_speed(cloud).object_store_mb_s_per_stream, rate)
    return SaveEstimate(bytes=total_bytes, mb_per_second=rate, store=how,
                        largest_rank_bytes=fullest_rank_bytes, stream_mb_per_second=stream)
