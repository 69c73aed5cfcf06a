"""How fast the job would train, before anything exists: a planned samples/s per GPU. Where
torchrec's planner was run for the job's shape, the sizing advisor's step (planned_step, the
figure `plan` prints); elsewhere a rough plan (could be off several-fold) from recorded public
and bench runs (infra/catalog/planning.py
THROUGHPUT_REFERENCES) scaled by the GPUs' matmul peak and the model's dense work, bounded by
the network's share of the embedding all-to-all on 2 or more nodes (planned_throughput). The
run estimate (infra/estimate.py), the checkpoint cadence (infra/cadence.py), the input rules
(infra/settings/cost_rules.py) and the sizing advisor (torchrec_cloud/plan.py) read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infra.catalog.cloud import Cloud
from infra.catalog.gpus import gpu_model
from infra.catalog.machines import fabric_in_use, gpu_nvlink_gb_s, inter_host_gb_s_per_gpu, machine
from infra.catalog.planning import THROUGHPUT_REFERENCES, ThroughputReference, throughput_reference
from infra.step_time import all_reduce_ms, dense_step_ms, exposed_all_reduce_ms, gpu_step_ms

if TYPE_CHECKING:
    from infra.settings.model.stack_file import Settings


@dataclass(frozen=True)
class Throughput:
    """A planned samples/s per GPU and how it was planned (its inputs named): never measured
    for the job itself."""

    samples_per_s_per_gpu: float
    source: str


def job_trainer_flags(s: Settings) -> dict[str, Any]:
    """The job's trainer flags as the pod's trainer takes them (`512,256,128` and
    [512, 256, 128] are the same list; infra/settings/trainer_flags.py)."""
    from infra.settings.trainer_flags import trainer_flags_in_effect

    return trainer_flags_in_effect(s.job.trainer_args)


def _ids_per_sample(s: Settings, flags: dict[str, Any]) -> int:
    sizes = flags.get("multi_hot_sizes") or (
        s.dataset.prepare.multi_hot_sizes if s.dataset.path and s.dataset.prepare.enabled else None)
    from trainer.config import NUM_SPARSE_FEATURES

    return int(sum(sizes)) if sizes else NUM_SPARSE_FEATURES


ROUGH_PLAN = "rough plan (could be off several-fold)"
COMM_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}
ID_BYTES = 8  # int64 ids in the KeyedJaggedTensor the input all-to-all sends
ANCHOR = "p4d 1 node"  # infra/catalog/planning.py THROUGHPUT_REFERENCES: every plan starts there
NETWORK_REFERENCE = "p4d 2 nodes"  # ... and its network share is calibrated on this one


def _mlp_macs(inputs: int, sizes: list[int]) -> int:
    macs = 0
    for size in sizes:
        macs, inputs = macs + inputs * size, size
    return macs


def dense_macs_per_sample(dim: int, dense: list[int], over: list[int], interaction: str,
                          dcn_layers: int = 0, dcn_rank: int = 0) -> int:
    """Multiply-adds of DLRM's dense part for one sample's forward pass (backward ~2x more, the
    same factor for every model): bottom MLP on the 13 dense features, the interaction over the
    27 vectors (26 pooled embeddings + the bottom MLP's output), the top MLP."""
    from trainer.config import NUM_SPARSE_FEATURES

    vectors = NUM_SPARSE_FEATURES + 1
    bottom = _mlp_macs(13, dense)
    if interaction == "dcn":  # DCNv2 low-rank cross layers on the concatenated vectors
        width = vectors * dim
        return bottom + dcn_layers * 2 * width * dcn_rank + _mlp_macs(width, over)
    pairs = vectors * (vectors - 1) // 2  # dot: every pair's dot product
    return bottom + pairs * dim + _mlp_macs(dim + pairs, over)


def _reference_macs(r: ThroughputReference) -> int:
    return dense_macs_per_sample(r.embedding_dim, list(r.dense_arch_layer_sizes),
                                 list(r.over_arch_layer_sizes), r.interaction)


def crossing_bytes_per_sample(ids: int, dim: int, forward_bytes: int, backward_bytes: int,
                              nodes: int) -> float:
    """Bytes one sample puts on the network between nodes each step, in one direction of a
    GPU's link: its ids out to the tables' ranks (forward input all-to-all), its 26 pooled
    embeddings back (forward output all-to-all, EmbeddingBags pool a feature's ids into one
    vector, so multi-hot adds ids, not vectors) and their gradients out again (backward), at
    the all-to-all's precisions; times the share of tables on other nodes, (nodes - 1) / nodes
    with the tables spread evenly. Replicated (data-parallel) tables and the dense all-reduce
    are not counted."""
    from trainer.config import NUM_SPARSE_FEATURES

    if nodes < 2:
        return 0.0
    per_sample = ids * ID_BYTES + NUM_SPARSE_FEATURES * dim * (forward_bytes + backward_bytes)
    return per_sample * (nodes - 1) / nodes


def all_to_all_bytes_per_sample(s: Settings, flags: dict[str, Any]) -> float:
    """crossing_bytes_per_sample of the job: its ids, width, comm precisions and nodes."""
    return crossing_bytes_per_sample(
        _ids_per_sample(s, flags), int(flags["embedding_dim"]),
        COMM_BYTES[str(flags.get("embedding_comm_forward_precision", "fp32"))],
        COMM_BYTES[str(flags.get("embedding_comm_backward_precision", "fp32"))], s.job.nodes)


def network_efficiency() -> float:
    """The share of the rated inter-node bandwidth per GPU that the 2-node public run turned
    into embedding all-to-all bytes: its samples/s per GPU times its crossing bytes per sample
    over its machine's rated fabric per GPU (about 0.27 for 2 x p4d: 0.127M samples/s per GPU
    against a 0.466M bound). Latency, the dense all-reduce, imbalance and partial overlap with
    compute are all in it, which the byte count leaves out."""
    r = throughput_reference(NETWORK_REFERENCE)
    bytes_ = crossing_bytes_per_sample(r.ids_per_sample, r.embedding_dim, r.comm_bytes,
                                       r.comm_bytes, r.nodes)
    per_gpu = inter_host_gb_s_per_gpu(machine(Cloud.AWS, r.machine or ""), r.fabric) * 1e9
    return r.samples_per_s_per_gpu * bytes_ / per_gpu


def _anchor_text(r: ThroughputReference) -> str:
    batch = f"batch {r.batch_per_gpu}/GPU" if r.batch_per_gpu else "batch not recorded"
    where = f"{r.nodes} x {r.machine}" if r.machine else f"{r.gpus} x {r.gpu_model}"
    return (f"{r.samples_per_s_per_gpu / 1e6:.3f}M/GPU on {where} ({r.source}, {r.date}; dim "
            f"{r.embedding_dim}, MLPs {','.join(map(str, r.dense_arch_layer_sizes))} / "
            f"{','.join(map(str, r.over_arch_layer_sizes))}, {r.interaction}, {batch})")


def _from_reference(r: ThroughputReference, peak: float, job_macs: int, gpu: str
                    ) -> tuple[float, str]:
    """A reference's samples/s per GPU times the GPUs' dense BF16 matmul peak ratio, times the
    ratio of dense work per sample where the job's model is larger (a smaller model is not
    taken as faster: per-step overheads, not FLOPs, bound small models)."""
    gpu_ratio = peak / gpu_model(r.gpu_model, r.gpu_memory_gib).bf16_dense_tflops
    model_ratio = min(1.0, _reference_macs(r) / job_macs)
    rate = r.samples_per_s_per_gpu * gpu_ratio * model_ratio
    return rate, (f"{_anchor_text(r)} x {gpu_ratio:.2f} matmul peak ({gpu} / {r.gpu_model}) x "
                  f"{model_ratio:.2f} dense work per sample = {rate / 1e6:.3f}M")


@dataclass(frozen=True)
class PlannedStep:
    """One training step of the job as the sizing advisor times it (infra/step_time.py), from
    torchrec's planner's figures recorded for the job's shape (trainer/sizing.py)."""

    embeddings_ms: float
    dense_ms: float
    all_reduce_ms: float
    batch_per_rank: int
    tf32: bool

    @property
    def gpu_ms(self) -> float:
        return gpu_step_ms(self.embeddings_ms, self.dense_ms, self.all_reduce_ms)

    @property
    def samples_per_s_per_gpu(self) -> float:
        return self.batch_per_rank / (self.gpu_ms / 1e3)

    def source(self) -> str:
        return (f"the sizing advisor's step (`python -m torchrec_cloud plan`): embeddings "
                f"{self.embeddings_ms:.2f} ms (torchrec's planner, slowest rank, recorded in "
                f"trainer/sizing.py) + dense {self.dense_ms:.2f} ms (forward + backward at the "
                f"rated {'TF32' if self.tf32 else 'FP32'} throughput) + "
                f"{exposed_all_reduce_ms(self.all_reduce_ms, self.dense_ms):.2f} ms of the "
                f"{self.all_reduce_ms:.2f} ms all-reduce not hidden = {self.gpu_ms:.2f} ms a step "
                f"of {self.batch_per_rank}/rank, GPU-bound (input, evaluations and saves apart)")


def planned_step(s: Settings) -> PlannedStep | None:
    """The advisor's step for this job where torchrec's planner was run for its shape (tables,
    optimizer, machine, nodes, per-rank batch, dense model) over the machine's fabric
    (trainer/sizing.py planned_rank); None elsewhere (the stack has no torch to plan with)."""
    from infra.preemption import _tables
    from trainer.sizing import planned_rank

    gpu = machine(s.cloud, s.job_pool.machine_type)
    if gpu.gpu is None:
        return None
    flags = job_trainer_flags(s)
    nodes, ranks = s.job.nodes, s.job.nodes * s.job.processes_per_node
    if s.job.processes_per_node != gpu.gpu_count or (
            nodes > 1 and not fabric_in_use(gpu, s.interconnect.fabric)):
        return None
    batch = int(flags.get("global_batch_size") or 0) // ranks or int(flags["batch_size"])
    recorded = planned_rank(*_tables(s.job.trainer_args), gpu.name, nodes, batch)
    dense = (tuple(int(v) for v in flags["dense_arch_layer_sizes"]),
             tuple(int(v) for v in flags["over_arch_layer_sizes"]), str(flags["interaction"]),
             int(flags["dcn_num_layers"]), int(flags["dcn_low_rank_dim"]))
    if recorded is None or recorded.dense != dense:
        return None
    tf32 = str(flags["tf32"]) == "on"
    macs = dense_macs_per_sample(int(flags["embedding_dim"]), list(dense[0]), list(dense[1]),
                                 dense[2], dense[3], dense[4])
    link = inter_host_gb_s_per_gpu(gpu, True) if nodes > 1 else (gpu_nvlink_gb_s(gpu) or 0.0)
    return PlannedStep(
        embeddings_ms=recorded.embeddings_ms,
        dense_ms=dense_step_ms(batch, macs, gpu.gpu.tf32_dense_tflops if tf32
                               else gpu.gpu.fp32_dense_tflops),
        all_reduce_ms=all_reduce_ms(recorded.dense_parameters, ranks, link),
        batch_per_rank=batch, tf32=tf32)


def planned_throughput(s: Settings) -> Throughput | None:
    """Samples/s per GPU of the job's machine and model, never "measured" (no recorded run
    repeats a job's batch, model, GPUs and software). Where torchrec's planner was run for the
    job's shape, the sizing advisor's step (planned_step: the same figure `plan` prints).
    Elsewhere a rough plan, the lower of:
    - compute: the public anchor (THROUGHPUT_REFERENCES "p4d 1 node": torchrec's DLRM example,
      8 x A100, batch 8192 per GPU) scaled by matmul peak and dense work (_from_reference);
      on H200 also our own bench's figure scaled the same way (its batch was not recorded),
      the lower of the two. Embedding lookups are not the bound: the bench read 26 x 64 x 4 B
      per sample, ~11 GB/s of H200's 4,800 GB/s.
    - network (2 or more nodes): the GPU's share of the inter-node bandwidth on the path NCCL
      takes (inter_host_gb_s_per_gpu: the fabric, or the primary NIC with interconnect.fabric
      false) times network_efficiency (the 2-node public run's share), over the embedding
      all-to-all bytes a sample sends across nodes (all_to_all_bytes_per_sample).
    The job's per-rank batch is named beside the anchor's, not scaled. None for a machine
    without GPUs (every GPU model's peak is in the catalog: GpuModel)."""
    gpu = machine(s.cloud, s.job_pool.machine_type)
    if gpu.gpu is None:
        return None
    step = planned_step(s)
    if step is not None:  # the advisor's own step: one rate for `plan` and `check`
        return Throughput(step.samples_per_s_per_gpu, step.source())
    peak = gpu.gpu.bf16_dense_tflops
    flags = job_trainer_flags(s)
    job_macs = dense_macs_per_sample(int(flags["embedding_dim"]),
                                     [int(v) for v in flags["dense_arch_layer_sizes"]],
                                     [int(v) for v in flags["over_arch_layer_sizes"]],
                                     str(flags["interaction"]), int(flags["dcn_num_layers"]),
                                     int(flags["dcn_low_rank_dim"]))
    model = gpu.gpu_model or ""
    plans = [_from_reference(throughput_reference(ANCHOR), peak, job_macs, model)]
    plans += [_from_reference(r, peak, job_macs, model) for r in THROUGHPUT_REFERENCES
              if r.name != ANCHOR and r.nodes == 1
              and (r.gpu_model, r.gpu_memory_gib) == (gpu.gpu_model, gpu.gpu_memory_gib)]
    compute, _ = min(plans)
    how = f"{ROUGH_PLAN}: " + "; ".join(text for _, text in plans)
    if len(plans) > 1:
        how += f"; the lower of these is used, {compute / 1e6:.3f}M"
    ranks = s.job.nodes * s.job.processes_per_node
    batch = int(flags.get("global_batch_size") or 0) // ranks or int(flags["batch_size"])
    how += f"; this job's batch {batch}/rank (the plan does not scale with batch)"
    crossing = all_to_all_bytes_per_sample(s, flags)
    if not crossing:
        return Throughput(compute, how)
    fabric = fabric_in_use(gpu, s.interconnect.fabric)
    bandwidth = inter_host_gb_s_per_gpu(gpu, s.interconnect.fabric)
    efficiency = network_efficiency()
    network = bandwidth * 1e9 * efficiency / crossing
    path = (f"{gpu.interconnect.value} fabric" if fabric
            else "plain sockets on the primary NIC (interconnect.fabric false or no fabric)")
    bound = (f"; network bound {network / 1e6:.3f}M/GPU ({bandwidth:g} GB/s per GPU over "
             f"{path} x {efficiency:.2f} reached by the 2-node public run, over "
             f"{crossing / 1e3:.1f} kB of embedding all-to-all per sample across "
             f"{s.job.nodes} nodes)")
    if network < compute:
        return Throughput(network, f"{how}{bound}; the network bound is the lower and is used")
    return Throughput(compute, f"{how}{bound}")
