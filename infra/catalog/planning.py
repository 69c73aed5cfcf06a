"""Figures the run estimate (infra/throughput.py, infra/estimate.py) and the sizing advisor
(torchrec_cloud/plan.py) plan from: recorded training runs with every input they were recorded
with, and planning rates of the GPU and the input pipeline. None is measured for a job."""

from __future__ import annotations

from dataclasses import dataclass


# Planning figures for an evaluation's exact AUC on the GPU (trainer/metrics.py: one sort of
# the scores, then cumulative sums): keys sorted per second by torch.sort on an A100/H100-class
# GPU, CONSERVATIVE (CUB's radix sort is several times faster on float keys); and the host
# copy rate of a checkpoint's staging (device to pageable host memory), CONSERVATIVE.
GPU_SORT_KEYS_PER_S = 1e9
HOST_STAGING_GB_S = 10.0
# PLANNING CONSTANT: CPU time to draw MLPerf's multi-hot ids on the fly (214 ids a sample,
# trainer/data/multi_hot.py ``expand``) and build the batch's tensors, per sample on one core:
# ~31 ms a 4,096-sample batch (TorchRec/MLPerf review); measured here (2 loaded cores,
# OMP_NUM_THREADS=1, 500k-row tables, best of 7) 28.8 ms. The trainer spreads it over its
# reader processes (trainer/data/loader.py readers_for); the advisor adds it to the input.
MULTI_HOT_EXPAND_MS_PER_SAMPLE = 31.0 / 4096


# --- Training throughput: recorded runs the run estimate plans from (infra/throughput.py) -------
@dataclass(frozen=True)
class ThroughputReference:
    """One recorded training run, with every input it was recorded with: the run estimate plans
    a job's samples/s from these (infra/estimate.py, planned_throughput) and calls no figure
    "measured" for a job, since no job repeats a run's batch, model, GPUs and software.
    Model: 26 features, EmbeddingBag tables, dot interaction unless said."""

    name: str
    gpu_model: str
    gpu_memory_gib: int
    machine: str | None  # the catalog machine it ran on, where one
    nodes: int
    gpus: int  # all GPUs of the run
    samples_per_s: float  # the whole run's records/s
    batch_per_gpu: int | None  # None: not recorded
    embedding_dim: int
    ids_per_sample: int  # one-hot: one id per feature
    rows: tuple[int, ...]
    dense_arch_layer_sizes: tuple[int, ...]
    over_arch_layer_sizes: tuple[int, ...]
    interaction: str
    comm_bytes: int  # bytes per value of the embedding all-to-all (4: fp32)
    fabric: bool  # its nodes talked over the machine's fabric
    date: str
    source: str

    @property
    def samples_per_s_per_gpu(self) -> float:
        return self.samples_per_s / self.gpus


# pytorch/torchrec examples/dlrm/README.MD, "Preliminary Training Results" (commit 488c02b,
# runs of 2022-01): Criteo 1TB, CUDA 11.0, NCCL 2.10.3, p4d.24xlarge with EFA, dlrm_main.py
# with --embedding_dim 128 --dense_arch_layer_sizes 512,256,128 --over_arch_layer_sizes
# 1024,1024,512,256,1 (DLRM's dot interaction, fp32 all-to-all).
_TORCHREC_DLRM = "pytorch/torchrec examples/dlrm/README.MD, Preliminary Training Results"
_DLRM_ROWS_40M = (40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956,
                  405282, 10, 2209, 11938, 155, 4, 976, 14, 40000000, 40000000, 40000000,
                  590152, 12973, 108, 36)
_DLRM_ROWS_80M = (80000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 80000000, 3067956,
                  405282, 10, 2209, 11938, 155, 4, 976, 14, 80000000, 40790948, 80000000,
                  590152, 12973, 108, 36)
THROUGHPUT_REFERENCES: tuple[ThroughputReference, ...] = (
    # The anchor of every plan: 1 x p4d.24xlarge, 8 x A100 40GB, 5,497,159.68 rec/s
    # ("MLPerf" row: local batch 8192, global 65536).
    ThroughputReference(
        "p4d 1 node", "A100", 40, "p4d.24xlarge", nodes=1, gpus=8, samples_per_s=5_497_159.68,
        batch_per_gpu=8192, embedding_dim=128, ids_per_sample=26, rows=_DLRM_ROWS_40M,
        dense_arch_layer_sizes=(512, 256, 128), over_arch_layer_sizes=(1024, 1024, 512, 256, 1),
        interaction="dot", comm_bytes=4, fabric=True, date="2022-01",
        source=f"{_TORCHREC_DLRM}, MLPerf row"),
    # The same model on 2 nodes over EFA, 2,028,339.2 rec/s ("MLPerfx2": local batch 4096):
    # the network calibration (infra/estimate.py network_efficiency).
    ThroughputReference(
        "p4d 2 nodes", "A100", 40, "p4d.24xlarge", nodes=2, gpus=16, samples_per_s=2_028_339.2,
        batch_per_gpu=4096, embedding_dim=128, ids_per_sample=26, rows=_DLRM_ROWS_80M,
        dense_arch_layer_sizes=(512, 256, 128), over_arch_layer_sizes=(1024, 1024, 512, 256, 1),
        interaction="dot", comm_bytes=4, fabric=True, date="2022-01",
        source=f"{_TORCHREC_DLRM}, MLPerfx2 row"),
    # Our trainer on 1 x H200 (bench/train_throughput.py MODEL; tests/test_estimate.py checks
    # the two agree): 26 tables of 100,000 rows, dim 64, bottom MLP 512,256,64, top MLP
    # 512,512,256,1, SGD, synthetic data; 1.70M samples/s (TorchRec's reference loop 1.96M).
    # Recorded in that session's closing note only; its per-rank batch was NOT recorded (the
    # bench's default is 512; the readers' commit 104ec66 speaks of 16k batches). Used on H200
    # only, beside the anchor, the lower of the two.
    ThroughputReference(
        "H200 bench", "H200", 141, None, nodes=1, gpus=1, samples_per_s=1_700_000.0,
        batch_per_gpu=None, embedding_dim=64, ids_per_sample=26, rows=(100_000,) * 26,
        dense_arch_layer_sizes=(512, 256, 64), over_arch_layer_sizes=(512, 512, 256, 1),
        interaction="dot", comm_bytes=4, fabric=False, date="2026-11",
        source="make bench (python bench/train_throughput.py) on 1 x H200"),
)


def throughput_reference(name: str) -> ThroughputReference:
    return next(r for r in THROUGHPUT_REFERENCES if r.name == name)
