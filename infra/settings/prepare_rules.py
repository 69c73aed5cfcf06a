"""The dataset-preparation rules (`dataset.prepare`: the preparation Job, workloads/prepare.py):
a source and an output each cloud can reach, days that fit the format, a pod that holds the
workers and the shuffle, an end before the deadline and an output the file system holds.
Collected by all_rules.py after the shared rules (rules.py), in the order they were listed there.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

from infra.catalog.cloud import Cloud
from infra.catalog.machines import Machine, find_machine
from infra.pod_share import NODE_SHARE, SYSTEM_POOL_SHARE, PrepareSize
from infra.settings.errors import Problem, set_command
from infra.settings.model.dataset import CRITEO_1TB_DAYS, CRITEO_SPARSE_FEATURES, DatasetPrepare
from infra.settings.model.job import PoolChoice
from infra.settings.model.shared_file_system import AzureNetAppFiles
from infra.settings.model.stack_file import Settings
from infra.settings.rules import Rule
from trainer.prepare.shuffle_size import (DAY_BYTES_PER_ROW as SHUFFLE_DAY_BYTES_PER_ROW,
                                          PERMUTATION_BYTES_PER_ROW as SHUFFLE_PERMUTATION_BYTES_PER_ROW,
                                          memory_bytes as shuffle_memory_bytes)
from trainer.prepare import (CRITEO_1TB_ROWS, CRITEO_1TB_TRAINING_ROWS, CRITEO_KAGGLE_ROWS, WORKER_MEMORY_GIB,
                             default_workers, estimated_hours)


# --- dataset.prepare: the preparation Job (workloads/prepare.py) ------------------------------
# Bucket URIs the job's workload identity can read, per cloud: the checkpoint store's scheme
# (infra/contract.py CheckpointStore.uri); adlfs reads az://<container>/<prefix> in the storage
# account the job's identity is granted (AZURE_STORAGE_ACCOUNT_NAME).
SOURCE_SCHEMES = {Cloud.AWS: "s3", Cloud.GCP: "gs", Cloud.AZURE: "az"}
BUCKET_URI = re.compile(r"^(s3|gs)://[a-z0-9][a-z0-9._-]{1,220}[a-z0-9](/.*)?$")
# Azure: container names are 3-63 lowercase letters, digits and single hyphens, starting and
# ending with a letter or digit; account names 3-24 lowercase letters and digits
# (https://learn.microsoft.com/rest/api/storageservices/naming-and-referencing-containers--blobs--and-metadata,
# https://learn.microsoft.com/azure/storage/common/storage-account-overview#storage-account-name).
# adlfs takes the account from the host of az://<container>@<account>.blob.core.windows.net/...
# (adlfs spec.py _get_kwargs_from_urls); without one, AZURE_STORAGE_ACCOUNT_NAME (the stack's).
AZURE_SOURCE_URI = re.compile(r"^az://(?=[a-z0-9-]{3,63}(?:[@/]|$))"
                              r"(?P<container>[a-z0-9](?:-?[a-z0-9])*)"
                              r"(?:@(?P<account>[a-z0-9]{3,24})\.blob\.core\.windows\.net)?(/.*)?$")
# Resource group names: 1-90 letters, digits, '_', '-', '.', '(' and ')', not ending in '.'
# (https://learn.microsoft.com/azure/azure-resource-manager/management/resource-name-rules).
RESOURCE_GROUP = re.compile(r"^[\w\-.()]{0,89}[\w\-()]$")
DAYS_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
# MLPerf DLRM-DCNv2's materialized multi-hot Criteo 1TB is "the 3.8 TB materialized multi-hot
# dataset" (mlcommons/training recommendation_v2/torchrec_dlrm/README.MD); the one-hot layout it
# is made from adds 13 float32 + 26 int32 + 1 int32 = 160 bytes per row, 4,195,197,692 training
# rows (TOTAL_TRAINING_SAMPLES, same README) plus day 23: about 0.7 TB.
MULTI_HOT_1TB_BYTES = 3.8e12 + 0.7e12
GIB = 1024**3


def _relative_folder(path: str) -> bool:
    return bool(path) and not path.startswith("/") and ".." not in path.split("/")


def _parts(path: str) -> list[str]:
    return [part for part in path.split("/") if part]


def prepare_days(text: str, fmt: str) -> list[int] | None:
    """The days `dataset.prepare.days` names (criteo_1tb: all 24 when empty); None if malformed."""
    if not text:
        return list(range(CRITEO_1TB_DAYS)) if fmt == "criteo_1tb" else []
    match = DAYS_RANGE.match(text)
    if not match:
        return None
    first, last = int(match.group(1)), int(match.group(2) or match.group(1))
    return list(range(first, last + 1)) if first <= last < CRITEO_1TB_DAYS else None


def prepare_has_an_output_and_a_source(s: Settings) -> Iterator[Problem]:
    prepare = s.dataset.prepare
    if not prepare.enabled:
        return
    if not s.dataset.path:
        yield Problem("dataset.path", s.dataset.path,
                      "dataset.prepare writes the trainer's layout here: a folder relative to "
                      "the shared file system's mount, e.g. criteo/1tb-prepared")
    source, scheme = prepare.source, SOURCE_SCHEMES[s.cloud]
    if not source:
        yield Problem("dataset.prepare.source", source,
                      f"required with dataset.prepare: the raw files' {scheme}://bucket/prefix "
                      "or a folder on the shared file system relative to its mount")
    elif "://" in source:
        if not source.startswith(f"{scheme}://"):
            yield Problem("dataset.prepare.source", source,
                          f"on {s.cloud.value} the preparation's own identity reads {scheme}:// "
                          f"URIs ({scheme}://bucket/prefix), or give a folder on the shared file "
                          "system relative to its mount")
        elif s.cloud == Cloud.AZURE:
            yield from _azure_source(s)
        elif not BUCKET_URI.match(source):
            yield Problem("dataset.prepare.source", source, f"a {scheme}://bucket/prefix URI")
    elif not _relative_folder(source):
        yield Problem("dataset.prepare.source", source,
                      "a folder relative to the shared file system's mount, without '..', or a "
                      f"{scheme}://bucket/prefix URI")
    elif s.dataset.path and (
            _parts(source)[:len(_parts(s.dataset.path))] == _parts(s.dataset.path)
            or _parts(s.dataset.path)[:len(_parts(source))] == _parts(source)):
        yield Problem("dataset.prepare.source", source,
                      f"a folder apart from dataset.path ({s.dataset.path!r}), which the Job "
                      "writes: neither may contain the other")


def _azure_source(s: Settings) -> Iterator[Problem]:
    prepare = s.dataset.prepare
    match = AZURE_SOURCE_URI.match(prepare.source)
    if not match:
        yield Problem("dataset.prepare.source", prepare.source,
                      "az://<container>@<account>.blob.core.windows.net/<prefix> (an existing "
                      "account) or az://<container>/<prefix> (the stack's account); a container "
                      "name is 3-63 lowercase letters, digits and single hyphens")
    elif match.group("account") and not RESOURCE_GROUP.match(prepare.source_resource_group):
        yield Problem("dataset.prepare.sourceResourceGroup", prepare.source_resource_group,
                      f"the resource group of storage account {match.group('account')!r} (this "
                      "subscription): the stack grants the job's identity Storage Blob Data "
                      "Reader on its container")
    elif not match.group("account") and prepare.source_resource_group:
        yield Problem("dataset.prepare.sourceResourceGroup", prepare.source_resource_group,
                      "only with a source naming its account, az://<container>@<account>"
                      ".blob.core.windows.net/<prefix>; az://<container>/... is in the stack's "
                      "own account")


def prepare_multi_hot_sizes_are_criteo_features(s: Settings) -> Iterator[Problem]:
    sizes = s.dataset.prepare.multi_hot_sizes
    if sizes is not None and (len(sizes) != CRITEO_SPARSE_FEATURES or min(sizes, default=0) < 1):
        yield Problem("dataset.prepare.multiHotSizes", sizes,
                      f"exactly {CRITEO_SPARSE_FEATURES} positive integers, one per categorical "
                      f"feature (got {len(sizes)}), e.g. MLPerf's "
                      "[3,2,1,2,6,1,1,1,1,7,3,8,1,6,9,5,1,1,1,12,100,27,10,3,1,1]")


def prepare_days_fit_the_format(s: Settings) -> Iterator[Problem]:
    prepare = s.dataset.prepare
    if prepare.format.value == "criteo_kaggle" and prepare.days:
        yield Problem("dataset.prepare.days", prepare.days,
                      "criteo_kaggle is one file (train.txt): leave days empty")
    elif prepare_days(prepare.days, prepare.format.value) is None:
        yield Problem("dataset.prepare.days", prepare.days,
                      "a day or a range of days of Criteo 1TB, FIRST-LAST within 0-23, e.g. "
                      "0-23 (empty = all 24)")


def prepare_shuffles_criteo_1tb_days(s: Settings) -> Iterator[Problem]:
    """The shuffle mixes the training days (all but the last); Kaggle's one file has none."""
    prepare = s.dataset.prepare
    if prepare.shuffle and prepare.format.value == "criteo_kaggle":
        yield Problem("dataset.prepare.shuffle", prepare.shuffle,
                      "criteo_1tb only (it shuffles days 0-22 together); false for criteo_kaggle")


def prepare_owns_the_multi_hot_flags(s: Settings) -> Iterator[Problem]:
    """With dataset.prepare.multiHotSizes the stack decides whether the trainer draws multi-hot
    ids itself (onTheFly) or reads them (materialize); a trainerArgs value would disagree."""
    if not (s.dataset.prepare.enabled and s.dataset.prepare.multi_hot_sizes):
        return
    for flag, setting in (("multi_hot_sizes", "dataset.prepare.multiHotSizes"),
                          ("multi_hot_distribution_type", "dataset.prepare.multiHotDistribution")):
        if flag in s.job.trainer_args:
            yield Problem(f"job.trainerArgs.{flag}", s.job.trainer_args[flag],
                          f"set by the stack from {setting} and dataset.prepare.multiHot; set "
                          "those instead")


def prepare_fits_its_pool(s: Settings) -> Iterator[Problem]:
    prepare = s.dataset.prepare
    if not prepare.enabled:
        return
    if prepare.pool.value == "gpu":
        pool_path = "gpuPools.spot" if s.job.pool == PoolChoice.SPOT else "gpuPools.onDemand"
        pool = s.job_pool
        if pool.max_nodes < s.job.nodes + 1:
            # The training pods are created at once and hold their nodes while their main
            # container waits for layout.json: with maxNodes == job.nodes the preparation pod
            # could find no node left, and each side would wait for the other for ever.
            yield Problem(f"{pool_path}.maxNodes", pool.max_nodes,
                          f"dataset.prepare.pool gpu needs a node beside the job's "
                          f"{s.job.nodes}: at least {s.job.nodes + 1} (the extra node is "
                          "released when preparation ends), or set dataset.prepare.pool: cpu")
    sized = _prepare_size(s)
    if sized is None:
        return  # machines_are_in_the_catalog names it
    found = sized[0]
    if prepare.cpu >= found.vcpus:
        yield Problem("dataset.prepare.cpu", prepare.cpu,
                      f"fewer than the {found.vcpus} vCPUs of {found.name}, leaving room for "
                      "the node's own daemons (0 = sized from the machine)")
    if prepare.memory_gib >= found.memory_gib:
        yield Problem("dataset.prepare.memoryGib", prepare.memory_gib,
                      f"less than the {found.memory_gib:g} GiB of {found.name} (0 = sized from "
                      "the machine)")


def _prepare_size(s: Settings) -> tuple[Machine, PrepareSize] | None:
    """The machine the preparation pod lands on and its size there, as workloads/prepare.py
    requests it; None when the machine is not in the catalog (another rule names it)."""
    prepare = s.dataset.prepare
    gpu = prepare.pool.value == "gpu"
    found = find_machine(s.cloud, s.job_pool.machine_type if gpu else s.system_pool.machine_type)
    if found is None:
        return None
    return found, PrepareSize.of(found, NODE_SHARE if gpu else SYSTEM_POOL_SHARE, prepare.cpu,
                                 prepare.memory_gib, prepare.workers)


def prepare_workers_fit_their_pod(s: Settings) -> Iterator[Problem]:
    """More workers than CPUs only share them; more than the memory holds at WORKER_MEMORY_GIB
    each (a real 1TB day's scan takes 4-5 GB) get the pod killed for memory on every retry."""
    prepare = s.dataset.prepare
    sized = _prepare_size(s) if prepare.enabled and prepare.workers else None
    if sized is None:
        return
    size = sized[1]
    most = default_workers(size.cpu, size.memory_gib)  # what 0 would run
    if prepare.workers > most:
        yield Problem("dataset.prepare.workers", prepare.workers,
                      f"at most {most}: the pod has {size.cpu} CPUs and {size.memory_gib} "
                      f"GiB, and each worker needs one CPU and {WORKER_MEMORY_GIB} GiB (0 = that "
                      "many); for more, dataset.prepare.pool: gpu or a larger cpu/memoryGib")


def prepare_hours(s: Settings) -> tuple[Machine, int, int, int, float] | None:
    """(machine, rows, files, workers, hours): the preparation's scan and write passes at the
    measured rates (trainer.prepare.estimated_hours); None without a preparation or its machine.
    The deadline rule below and the run estimate (infra/estimate.py) both read it."""
    prepare = s.dataset.prepare
    sized = _prepare_size(s) if prepare.enabled else None
    if sized is None:
        return None
    found, size = sized
    if prepare.format.value == "criteo_1tb":
        files = len(prepare_days(prepare.days, "criteo_1tb") or [])
        rows = CRITEO_1TB_ROWS * files // CRITEO_1TB_DAYS
    else:
        files, rows = 1, CRITEO_KAGGLE_ROWS
    multi_hot = bool(prepare.multi_hot_sizes) and prepare.multi_hot.value == "materialize"
    workers = min(size.workers, size.cpu)
    shuffled = prepare.shuffle and prepare.format.value == "criteo_1tb" and files >= 2
    return found, rows, files, workers, estimated_hours(rows, files, workers, multi_hot, shuffled)


def prepare_ends_before_its_deadline(s: Settings) -> Iterator[Problem]:
    """A preparation that cannot end within deadlineHours fails when Kubernetes stops it, after
    the training job has held its GPU nodes all that time: refuse it now, from the time its scan
    and write passes take at the measured rates (trainer.prepare.estimated_hours)."""
    prepare = s.dataset.prepare
    estimate = prepare_hours(s)
    if estimate is None:
        return
    found, rows, files, workers, hours = estimate
    if hours > prepare.deadline_hours:
        gpu = prepare.pool.value == "gpu"
        where = f"a {found.name} of the GPU pool" if gpu else f"half a {found.name} of the system pool"
        yield Problem("dataset.prepare.deadlineHours", prepare.deadline_hours,
                      f"{rows:,} rows in {files} file(s) on {workers} worker(s) ({where}) take "
                      f"about {hours:.1f} h to scan and write (and shuffle, and write multi-hot "
                      "days) at the measured rates (trainer/prepare/__init__.py; the vocabulary "
                      "pass and the source's reads come "
                      f"on top): well above {math.ceil(hours)}, or more workers "
                      "(dataset.prepare.pool: gpu, or a larger cpu/memoryGib) or fewer days")


def prepare_output_fits_the_file_system(s: Settings) -> Iterator[Problem]:
    """Materialized multi-hot Criteo 1TB is about 4.5 TB; refuse a file system it cannot fit."""
    prepare = s.dataset.prepare
    if not (prepare.enabled and prepare.multi_hot_sizes
            and prepare.multi_hot.value == "materialize" and prepare.format.value == "criteo_1tb"):
        return
    days = prepare_days(prepare.days, prepare.format.value) or []
    need_gib = MULTI_HOT_1TB_BYTES * len(days) / CRITEO_1TB_DAYS / GIB
    fs = s.shared_file_system
    # FSx and Filestore size the file system; Azure NetApp Files the volume inside its pool.
    key, size = (("volumeSizeGib", fs.volume_size_gib) if isinstance(fs, AzureNetAppFiles)
                 else ("capacityGib", fs.capacity_gib))
    if size < need_gib:
        yield Problem(f"sharedFileSystem.{key}", size,
                      f"materialized multi-hot Criteo 1TB ({len(days)} days) needs about "
                      f"{need_gib:,.0f} GiB: a larger file system, or dataset.prepare.multiHot: "
                      "onTheFly (one-hot on disk, about 0.7 TB; the trainer draws the extra ids)")


def _training_rows(prepare: DatasetPrepare) -> tuple[int, int] | None:
    """(rows, days) of Criteo 1TB's training days (all prepared days but the last)."""
    if prepare.format.value != "criteo_1tb":
        return None
    days = len(prepare_days(prepare.days, "criteo_1tb") or [])
    train = days - 1
    return (CRITEO_1TB_TRAINING_ROWS * train // (CRITEO_1TB_DAYS - 1), train) if train else None


def prepare_shuffle_fits_its_pod(s: Settings) -> Iterator[Problem]:
    """The shuffle draws a permutation of every training row, then gathers each shuffled day
    from all the days at random: its memory (trainer/prepare/shuffle.py memory_bytes) must fit
    the preparation pod, or the kernel kills it or it re-reads the days page by page."""
    prepare = s.dataset.prepare
    training = _training_rows(prepare) if prepare.enabled and prepare.shuffle else None
    sized = _prepare_size(s) if training else None
    if sized is None or training is None:
        return
    found, size = sized
    rows, days = training
    need = shuffle_memory_bytes(rows, days, size.workers)
    if size.memory_gib * GIB >= need:
        return
    gpu = prepare.pool.value == "gpu"
    where = f"a {found.name} of the GPU pool" if gpu else f"half a {found.name} of the system pool"
    gpu_machine = find_machine(s.cloud, s.job_pool.machine_type)
    gpu_size = PrepareSize.of(gpu_machine, NODE_SHARE) if gpu_machine else None
    if not gpu and gpu_size and gpu_size.memory_gib * GIB >= shuffle_memory_bytes(rows, days, gpu_size.workers):
        fix = (f"`{set_command('dataset.prepare.pool', 'gpu')}` ({gpu_size.memory_gib:,} GiB on a "
               f"{gpu_machine.name}, released when the preparation ends)")
    else:
        fix = (f"a job pool machine with more memory and dataset.prepare.pool gpu, or "
               f"`{set_command('dataset.prepare.shuffle', 'false')}`")
    yield Problem("dataset.prepare.pool", prepare.pool.value,
                  f"the shuffle of {rows:,} rows ({days} training days) needs about "
                  f"{math.ceil(need / GIB):,} GiB (the days it gathers from kept in memory, "
                  f"{SHUFFLE_DAY_BYTES_PER_ROW} bytes a row, and each busy worker's chunk; its "
                  f"permutation alone is {rows * SHUFFLE_PERMUTATION_BYTES_PER_ROW / 1e9:.1f} GB: "
                  f"trainer/prepare/shuffle.py memory_bytes); the pod has {size.memory_gib:,} GiB "
                  f"({where}): {fix}")


RULES: tuple[Rule, ...] = (
    prepare_has_an_output_and_a_source,
    prepare_multi_hot_sizes_are_criteo_features,
    prepare_days_fit_the_format,
    prepare_shuffles_criteo_1tb_days,
    prepare_owns_the_multi_hot_flags,
    prepare_fits_its_pool,
    prepare_workers_fit_their_pod,
    prepare_ends_before_its_deadline,
    prepare_output_fits_the_file_system,
    prepare_shuffle_fits_its_pod,
)
