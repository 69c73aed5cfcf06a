"""GPU models' rated figures: one record per GPU model and memory size, the one place a
TFLOPS, HBM or NVLink figure lives (machines.py refuses a GPU machine whose model has none)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuModel:
    """One GPU model at one memory size: the rated figures the gate, the estimate and the
    sizing advisor plan from. Read from memory of NVIDIA's data sheets, not re-verified in a
    stored copy (sources per figure below)."""

    model: str  # Machine.gpu_model
    memory_gib: int  # Machine.gpu_memory_gib
    # Dense BF16 tensor-core peak, TFLOPS, without sparsity (A100: 312; H100 SXM and H200: 989.5).
    bf16_dense_tflops: float
    # Rated dense fp32 matmuls, TFLOPS per GPU, without sparsity: plain FP32 (CUDA cores: the
    # trainer's default, --tf32 off) and TF32 tensor cores (--tf32 on). A100
    # (nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/
    # nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf: FP32 19.5, TF32 156 dense / 312
    # sparse); H100 SXM (nvidia.com/en-us/data-center/h100/: FP32 67, TF32 989 "with sparsity",
    # so 494.5 dense); H200 SXM (nvidia.com/en-us/data-center/h200/: the same 67 and 989). The
    # sizing advisor (torchrec_cloud/plan.py) times the dense layers at these rates.
    fp32_dense_tflops: float
    tf32_dense_tflops: float
    # GB/s (1e9 B/s), for the sharding planner. HBM: A100 40GB SXM 1,555; A100 80GB SXM 2,039;
    # H100 SXM 3,350; H200 4,800. NVLink: total bidirectional per GPU (A100 600, H100/H200
    # 900), the figure torchrec's own default (INTRA_NODE_BANDWIDTH, 600 GB/s for A100) is
    # given in.
    hbm_gb_s: float
    nvlink_gb_s: float


GPU_MODELS: tuple[GpuModel, ...] = (
    GpuModel("A100", 40, bf16_dense_tflops=312.0, fp32_dense_tflops=19.5, tf32_dense_tflops=156.0,
             hbm_gb_s=1555.0, nvlink_gb_s=600.0),
    GpuModel("A100", 80, bf16_dense_tflops=312.0, fp32_dense_tflops=19.5, tf32_dense_tflops=156.0,
             hbm_gb_s=2039.0, nvlink_gb_s=600.0),
    GpuModel("H100", 80, bf16_dense_tflops=989.5, fp32_dense_tflops=67.0, tf32_dense_tflops=494.5,
             hbm_gb_s=3350.0, nvlink_gb_s=900.0),
    GpuModel("H200", 141, bf16_dense_tflops=989.5, fp32_dense_tflops=67.0,
             tf32_dense_tflops=494.5, hbm_gb_s=4800.0, nvlink_gb_s=900.0),
)
_GPU_MODELS: dict[tuple[str | None, int], GpuModel] = {(g.model, g.memory_gib): g
                                                       for g in GPU_MODELS}


def gpu_model(model: str, memory_gib: int) -> GpuModel:
    """The record of a GPU model at a memory size (a recorded run's GPU: ThroughputReference)."""
    return _GPU_MODELS[(model, memory_gib)]


def find_gpu_model(model: str | None, memory_gib: int) -> GpuModel | None:
    """The record of a GPU model at a memory size, or None where the table has none (a
    machine's check when the catalog loads: machines.py)."""
    return _GPU_MODELS.get((model, memory_gib))
