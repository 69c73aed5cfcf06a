"""`dataset`: the training data, and `dataset.prepare`, the Job that turns raw Criteo files into
the layout the trainer reads."""

from __future__ import annotations

from enum import Enum

from pydantic import Field, field_validator

from infra.settings.model.section import Section


class CriteoFormat(str, Enum):
    CRITEO_1TB = "criteo_1tb"
    CRITEO_KAGGLE = "criteo_kaggle"


class MultiHotDistribution(str, Enum):
    UNIFORM = "uniform"
    PARETO = "pareto"


class MultiHotMode(str, Enum):
    MATERIALIZE = "materialize"
    ON_THE_FLY = "onTheFly"


class PreparePool(str, Enum):
    CPU = "cpu"
    GPU = "gpu"


CRITEO_SPARSE_FEATURES = 26  # categorical columns of every Criteo layout (trainer/config.py)
CRITEO_1TB_DAYS = 24  # day_0 .. day_23


class DatasetPrepare(Section):
    """A Kubernetes Job before training turns raw Criteo TSV files into the layout the trainer reads, at dataset.path (`python -m trainer.prepare`; the training pods wait for its layout.json). `prepare: true` is short for `prepare: {enabled: true}`."""  # noqa: E501 (one line: the docs/settings.md table row)

    enabled: bool = Field(False, description="Run the preparation Job before training.")
    source: str = Field(
        "", description="Where the raw files are (day_0 .. day_23, optionally .gz, or Kaggle "
        "train.txt): s3://bucket/prefix (aws), gs://bucket/prefix (gcp), "
        "az://container@account.blob.core.windows.net/prefix (azure, an existing account; see "
        "sourceResourceGroup) or az://container/prefix (the stack's checkpoint account), read "
        "with the preparation's own workload identity (service account "
        "<job.serviceAccount>-prepare, read-only on the source); or a folder on the shared file "
        "system, relative to its mount (the preparation then has no cloud identity).")
    source_resource_group: str = Field(
        "", description="Azure, with an az://container@account... source: the account's resource "
        "group in the stack's subscription; the stack grants the preparation's identity Storage "
        "Blob Data Reader on that container.")
    format: CriteoFormat = Field(
        CriteoFormat.CRITEO_1TB, description="criteo_1tb (24 day files) or criteo_kaggle "
        "(one train.txt).")
    days: str = Field(
        "", description="criteo_1tb only: the days to prepare, e.g. 0-23 or 0-3 (empty = all "
        "24; the last one is split into validation and test).")
    frequency_threshold: int = Field(
        0, ge=0, description="Ids seen fewer times than this in the whole data share one row "
        "(torchrec's contiguous_preproc_criteo; 3 gives torchrec's published table sizes); "
        "0 = every id keeps its own row.")
    max_ind_range: int = Field(
        0, ge=0, description="Cap every table at this many rows (ids modulo it, as MLPerf's "
        "40000000); 0 = no cap.")
    shuffle: bool = Field(
        False, description="criteo_1tb: shuffle the rows of all days but the last together, as "
        "MLPerf's preprocessing step 3 (torchrec's BinaryCriteoUtils.shuffle, seed 0: the same "
        "files); needed to reproduce MLPerf DLRM-DCNv2 (job.trainerArgs.recipe: mlperf). The "
        "last day stays as it is (validation and test halves).")
    multi_hot_sizes: list[int] | None = Field(
        None, description=f"{CRITEO_SPARSE_FEATURES} ids per feature for MLPerf DLRM-DCNv2's "
        "synthetic multi-hot data, e.g. [3,2,1,2,6,1,1,1,1,7,3,8,1,6,9,5,1,1,1,12,100,27,10,3,"
        "1,1]; null = one-hot.")
    multi_hot_distribution: MultiHotDistribution = Field(
        MultiHotDistribution.UNIFORM, description="uniform or pareto: how the extra multi-hot "
        "ids are drawn (the reference's --multi_hot_distribution_type).")
    multi_hot: MultiHotMode = Field(
        MultiHotMode.MATERIALIZE, description="With multiHotSizes: materialize (the Job writes "
        "MLPerf's day_<i>_sparse_multi_hot.npz, about 3.8 TB for 1TB) or onTheFly (the Job "
        "writes one-hot data and the trainer draws the extra ids per batch, "
        "--multi_hot_sizes).")
    pool: PreparePool = Field(
        PreparePool.CPU, description="cpu: half a system node (one worker on the default "
        "machines: fine for Kaggle, about 20 h for all of 1TB, with the GPU nodes held); "
        "gpu: a node of the job's GPU pool (job.pool), all its CPUs and memory, no GPU. "
        "gpu needs one node more than job.nodes in that pool's maxNodes, because the training "
        "pods hold their nodes while they wait.")
    workers: int = Field(
        0, ge=0, description="Parallel workers of the preparation (0 = one per CPU of its pod, "
        "as many as its memory holds at 6 GiB each: a real 1TB day's scan takes about 5 GB).")
    cpu: int = Field(0, ge=0, description="CPUs requested (0 = sized from the pool's machine).")
    memory_gib: int = Field(
        0, ge=0, description="Memory requested in GiB (0 = sized from the pool's machine).")
    deadline_hours: int = Field(
        48, ge=1, description="The Job fails after this long (activeDeadlineSeconds); a rerun "
        "skips finished days.")


class Dataset(Section):
    """Training data: synthetic unless a path is given."""

    path: str = Field(
        "",
        description="Criteo data on the shared file system, relative to its mount "
        "(empty = synthetic data); the output folder of dataset.prepare.",
    )
    import_uri: str = Field(
        "",
        description="AWS only: s3:// prefix linked to FSx as a data repository association.",
    )
    prepare: DatasetPrepare = Field(default_factory=DatasetPrepare)

    @field_validator("prepare", mode="before")
    @classmethod
    def _prepare_switch(cls, value: object) -> object:
        """`prepare: true` is `prepare: {enabled: true}`."""
        return {"enabled": value} if isinstance(value, bool) else value

    def bucket_uris(self, scheme: str) -> list[str]:
        """The `<scheme>://bucket/prefix` URIs the trainer's identity must read: AWS's
        importUri. The preparation's source is read by the preparation's own identity
        (prepare_source_uris), never the trainer's."""
        return [self.import_uri] if self.import_uri.startswith(f"{scheme}://") else []

    def prepare_source_uris(self, scheme: str) -> list[str]:
        """The preparation's source when it is in a `<scheme>://` bucket: all its own identity
        reads. Empty for a folder on the shared file system: the preparation then has no cloud
        identity at all."""
        source = self.prepare.source if self.prepare.enabled else ""
        return [source] if source.startswith(f"{scheme}://") else []


def uri_parts(uri: str) -> tuple[str, str]:
    """`scheme://bucket/some/prefix/` -> ("bucket", "some/prefix")."""
    bucket, _, prefix = uri.split("://", 1)[1].partition("/")
    return bucket, prefix.strip("/")
