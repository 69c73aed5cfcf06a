"""Process group from the torchrun environment, and TorchRec sharding of the model.

``python -m trainer`` without torchrun runs as a world of one, so the same program works
on a laptop, under ``torchrun --standalone`` and across nodes with c10d rendezvous.
"""

from __future__ import annotations

import os
import socket
from collections.abc import MutableMapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable, List, Optional

import torch
import torch.distributed as dist
from torchrec.distributed.model_parallel import DistributedModelParallel
from torchrec.distributed.planner import Topology
from torchrec.distributed.planner.types import ParameterConstraints
from torchrec.distributed.types import ShardingEnv
from torchrec.optim.apply_optimizer_in_backward import apply_optimizer_in_backward
from torchrec.optim.keyed import CombinedOptimizer, KeyedOptimizerWrapper
from torchrec.optim.optimizers import in_backward_optimizer_filter
from torchrec.optim.rowwise_adagrad import RowWiseAdagrad

from trainer.config import TrainConfig
from trainer.sizing import DATA_PARALLEL_MAX_MB
from trainer.data.layout import prepared_multi_hot_sizes
from trainer import planning

ADAGRAD_EPS = 1e-8  # mlcommons/training aa344c7 recommendation_v2/torchrec_dlrm/dlrm_main.py

# How long a rank may wait in one collective before its peer counts as gone, for the default
# group (NCCL on GPU, gloo on CPU) and the gloo group of the stop agreement. torch's defaults
# are 10 minutes for NCCL and 30 for gloo; a survivor whose peer vanished without closing its
# connections (a node powered off) would sit that long. The longest wait a healthy run has is
# rank 0's own work before a collective the others already entered: the TorchRec sharding plan
# (collective_plan broadcasts it), listing and cleaning the checkpoint store before a load,
# a reader process's first batches before the stop agreement. 5 minutes covers those with room,
# and is torchtitan's startup timeout (torchtitan/config/job_config.py, Comm.init_timeout_seconds
# = 300). A rank that waits longer exits: NCCL's watchdog aborts it (SIGABRT, see below), gloo
# raises "Timed out waiting ... for recv" (trainer/peers.py): both resume, not counted. The
# checkpoints' own gloo group keeps torch's 30 minutes: ranks' uploads may rightly differ by
# minutes, and it runs beside training, whose next collective notices a lost peer anyway.
COLLECTIVE_TIMEOUT_SECONDS = 300

# ProcessGroupNCCL's fault settings (torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp and
# docs/source/torch_nccl_environment_variables.md), set here before the group exists because
# the group reads them when it is created. A value already in the environment wins (an operator
# debugging a hang can set them on the pod), so they are defaults, not overrides.
NCCL_FAULT_ENV = {
    # 3 = tear the process down (SIGABRT) when the watchdog sees an error or a timeout, without
    # ncclCommAbort, which can itself hang on a dead peer. torch's default; explicit because
    # 0 or 2 from an image would leave a rank running with a dead communicator, and the
    # launcher maps exactly this abort to "resume" (trainer/launch.py). torchtitan forces 3.
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3",
    # After an error the watchdog sleeps 4 x this before the teardown, so every rank has time to
    # write its flight-recorder dump (ProcessGroupNCCL.cpp, Watchdog::runLoop: sleep_for(
    # getDumpTimeout() * 4)); torch's 15 s makes that a minute of idle survivors. A dump of the
    # 2,000-entry ring to the pod's /tmp takes well under a second: 5 s (20 s in all) is plenty.
    "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC": "5000",
    # Dump the flight recorder (the last collectives of each rank: which one never joined) on a
    # timeout or error. torch 2.13 defaults to on; explicit so the hang leaves evidence.
    "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
    # The monitor thread aborts the process when the watchdog itself stops beating (stuck in a
    # CUDA or NCCL call that never returns, e.g. on a GPU that fell off the bus): the same bound
    # as a collective, instead of torch's 8 minutes.
    "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": str(COLLECTIVE_TIMEOUT_SECONDS),
}


def set_nccl_fault_env(environ: MutableMapping[str, str] = os.environ) -> None:
    """NCCL_FAULT_ENV as defaults of this process's environment (before the group exists)."""
    for name, value in NCCL_FAULT_ENV.items():
        environ.setdefault(name, value)


@dataclass
class DistContext:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    device: torch.device
    # Gloo group for tiny CPU-side agreements (stop / end of data) that must not sync the GPU.
    control_group: Optional[dist.ProcessGroup]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_distributed() -> DistContext:
    """NCCL on GPU (one GPU per local rank), gloo on CPU; every group with the collective
    timeout above, NCCL with its fault settings."""
    if "RANK" not in os.environ:  # plain `python -m trainer`: a world of one
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
                          MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    timeout = timedelta(seconds=COLLECTIVE_TIMEOUT_SECONDS)
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        set_nccl_fault_env()
        dist.init_process_group(backend="nccl", device_id=device, timeout=timeout)
        control = dist.new_group(backend="gloo", timeout=timeout)
    else:
        device = torch.device("cpu")
        torch.set_flush_denormal(True)  # denormal floats make CPU matmuls many times slower
        dist.init_process_group(backend="gloo", timeout=timeout)
        control = None  # the default group already is gloo
    return DistContext(
        rank=dist.get_rank(),
        world_size=dist.get_world_size(),
        local_rank=local_rank,
        local_world_size=int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
        device=device,
        control_group=control,
    )


def host_memory_bytes() -> int:
    """Physical memory, or the container's cgroup limit when lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as fh:
                text = fh.read().strip()
            if text.isdigit():
                total = min(total, int(text))
        except OSError:
            pass
    return total


def hardware(ctx: DistContext, cfg: TrainConfig) -> planning.Hardware:
    """The planner's view of the real hardware: GPU memory per device, host memory per rank,
    and the bandwidths the stack passes from infra/catalog/ (0: torchrec's defaults)."""
    hbm = None
    if ctx.device.type == "cuda":
        hbm = torch.cuda.get_device_properties(ctx.device).total_memory
    return planning.Hardware(
        world_size=ctx.world_size, local_world_size=ctx.local_world_size,
        compute_device=ctx.device.type, hbm_bytes=hbm,
        ddr_bytes=host_memory_bytes() // max(ctx.local_world_size, 1),
        hbm_gb_per_sec=cfg.hbm_gb_per_sec or None,
        intra_host_gb_per_sec=cfg.intra_host_gb_per_sec or None,
        inter_host_gb_per_sec=cfg.inter_host_gb_per_sec or None)


def topology(ctx: DistContext, cfg: TrainConfig) -> Topology:
    return planning.topology(hardware(ctx, cfg))


def pooling_factors(cfg: TrainConfig) -> Optional[List[int]]:
    """Ids per sample of each feature where the data is multi-hot: on the fly
    (--multi_hot_sizes) or materialized by trainer.prepare (layout.json); None for one-hot."""
    return cfg.multi_hot_sizes or prepared_multi_hot_sizes(cfg.dataset_path)


def sharding_constraints(model: torch.nn.Module, pooling: Optional[List[int]] = None,
                         data_parallel_max_mb: float = DATA_PARALLEL_MAX_MB
                         ) -> dict[str, ParameterConstraints]:
    """planning.constraints for the model's tables (see there)."""
    ebc = model.model.sparse_arch.embedding_bag_collection
    tables = [(t.name, t.num_embeddings, t.embedding_dim) for t in ebc.embedding_bag_configs()]
    return planning.constraints(tables, [float(p) for p in pooling] if pooling else None,
                                data_parallel_max_mb)


def fuse_embedding_optimizer(model: torch.nn.Module, cfg: TrainConfig
                             ) -> Callable[[Any], torch.optim.Optimizer]:
    """Mark the tables' optimizer (fused into the backward; the planner sizes its state from
    it) and return the dense optimizer's factory."""
    if cfg.optimizer in ("adagrad", "exact_adagrad"):
        # torch.optim.Adagrad in the backward is what MLPerf's reference passes; torchrec runs
        # it as EmbOptimType.EXACT_ADAGRAD (torchrec 1.8 distributed/utils.py, the optimizer ->
        # EmbOptimType map). Its dense Adagrad: lr_decay, weight_decay and the initial
        # accumulator 0 (torch's defaults), eps ADAGRAD_EPS (dlrm_main.py).
        sparse = torch.optim.Adagrad if cfg.optimizer == "exact_adagrad" else RowWiseAdagrad
        apply_optimizer_in_backward(sparse, model.model.sparse_arch.parameters(),
                                    {"lr": cfg.learning_rate, "eps": ADAGRAD_EPS})
        return lambda params: torch.optim.Adagrad(params, lr=cfg.learning_rate, eps=ADAGRAD_EPS)
    apply_optimizer_in_backward(torch.optim.SGD, model.model.sparse_arch.parameters(),
                                {"lr": cfg.learning_rate})
    return lambda params: torch.optim.SGD(params, lr=cfg.learning_rate)


def shard_model(model: torch.nn.Module, cfg: TrainConfig, ctx: DistContext,
                batch_size: Optional[int] = None) -> tuple[
        DistributedModelParallel, CombinedOptimizer, KeyedOptimizerWrapper]:
    """Fuse the embedding optimizer into the backward, plan for ``batch_size`` samples per rank
    (default --batch_size; after a resize, the checkpoint's global batch over this world size),
    shard, and build the dense optimizer (which also trains the data-parallel tables).
    Returns (model, combined optimizer, dense optimizer)."""
    dense_factory = fuse_embedding_optimizer(model, cfg)
    planner = planning.planner(hardware(ctx, cfg), batch_size or cfg.batch_size,
                               sharding_constraints(model, pooling_factors(cfg),
                                                    cfg.data_parallel_max_mb))
    sharders = planning.sharders(cfg.embedding_comm_forward_precision,
                                 cfg.embedding_comm_backward_precision)
    plan = planner.collective_plan(model, sharders, dist.GroupMember.WORLD)
    dmp = DistributedModelParallel(
        module=model,
        device=ctx.device,
        plan=plan,
        env=ShardingEnv.from_process_group(dist.GroupMember.WORLD),
        sharders=sharders,
    )
    dense = KeyedOptimizerWrapper(dict(in_backward_optimizer_filter(dmp.named_parameters())), dense_factory)
    return dmp, CombinedOptimizer([dmp.fused_optimizer, dense]), dense
