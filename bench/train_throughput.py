"""Global training throughput: our trainer vs TorchRec's reference DLRM program, side by side.

The reference is ``torchrec_dlrm/dlrm_main.py`` of facebookresearch/dlrm with random data,
rebuilt here from TorchRec's public components (it is not vendored): DLRM/DLRM_DCN in
DLRMTrain, RandomRecDataset (one id per feature, 10 cached batches cycled), the embedding
optimizer applied in backward, EmbeddingShardingPlanner with Topology(world, local world,
device) and a 5% heuristical storage reservation, DMP, a KeyedOptimizerWrapper dense
optimizer in a CombinedOptimizer, TrainPipelineSparseDist, a per-step lr scheduler call and
a tqdm bar on rank 0. Both run the same model, optimizer (SGD, the reference's default),
batch, tables and number of processes, launched by torchrun on this machine; each reports
global samples/s over the steps after a warm-up.

    python bench/train_throughput.py [--rounds 2] [--steps 250] [--nproc N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import List

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The fixed configuration (reference flag names). Tables and batch sized for a 2-core CPU
# run in about a minute; on GPUs pass bigger values with --batch_size/--num_embeddings.
MODEL = {
    "num_embeddings": 100_000,
    "embedding_dim": 64,
    "dense_arch_layer_sizes": "512,256,64",
    "over_arch_layer_sizes": "512,512,256,1",
    "learning_rate": 0.01,
}
WARMUP_STEPS = 50


# ----------------------------------------------------------------------------- reference
def reference_worker(args: argparse.Namespace) -> None:
    """The reference program's training path (random data, SGD, original interaction)."""
    import itertools

    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader
    from torchrec import EmbeddingBagCollection
    from torchrec.datasets.criteo import DEFAULT_CAT_NAMES, DEFAULT_INT_NAMES
    from torchrec.datasets.random import RandomRecDataset
    from torchrec.distributed import TrainPipelineSparseDist
    from torchrec.distributed.comm import get_local_size
    from torchrec.distributed.model_parallel import DistributedModelParallel, get_default_sharders
    from torchrec.distributed.planner import EmbeddingShardingPlanner, Topology
    from torchrec.distributed.planner.storage_reservations import HeuristicalStorageReservation
    from torchrec.models.dlrm import DLRM, DLRMTrain
    from torchrec.modules.embedding_configs import EmbeddingBagConfig
    from torchrec.optim.apply_optimizer_in_backward import apply_optimizer_in_backward
    from torchrec.optim.keyed import CombinedOptimizer, KeyedOptimizerWrapper
    from torchrec.optim.optimizers import in_backward_optimizer_filter
    from tqdm import tqdm

    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        device, backend = torch.device(f"cuda:{local_rank}"), "nccl"
        torch.cuda.set_device(device)
    else:
        device, backend = torch.device("cpu"), "gloo"
    dist.init_process_group(backend=backend)
    sizes = [int(v) for v in MODEL["dense_arch_layer_sizes"].split(",")]
    over = [int(v) for v in MODEL["over_arch_layer_sizes"].split(",")]
    loader = DataLoader(
        RandomRecDataset(keys=DEFAULT_CAT_NAMES, batch_size=args.batch_size,
                         hash_size=args.num_embeddings, hash_sizes=None, manual_seed=None,
                         ids_per_feature=1, num_dense=len(DEFAULT_INT_NAMES)),
        batch_size=None, batch_sampler=None, pin_memory=backend == "nccl", num_workers=0)
    tables = [EmbeddingBagConfig(name=f"t_{f}", embedding_dim=MODEL["embedding_dim"],
                                 num_embeddings=args.num_embeddings, feature_names=[f])
              for f in DEFAULT_CAT_NAMES]
    model = DLRMTrain(DLRM(
        embedding_bag_collection=EmbeddingBagCollection(tables=tables, device=torch.device("meta")),
        dense_in_features=len(DEFAULT_INT_NAMES), dense_arch_layer_sizes=sizes,
        over_arch_layer_sizes=over, dense_device=device))
    lr = MODEL["learning_rate"]
    apply_optimizer_in_backward(torch.optim.SGD, model.model.sparse_arch.parameters(), {"lr": lr})
    planner = EmbeddingShardingPlanner(
        topology=Topology(local_world_size=get_local_size(), world_size=dist.get_world_size(),
                          compute_device=device.type),
        batch_size=args.batch_size,
        storage_reservation=HeuristicalStorageReservation(percentage=0.05))
    plan = planner.collective_plan(model, get_default_sharders(), dist.GroupMember.WORLD)
    dmp = DistributedModelParallel(module=model, device=device, plan=plan)
    dense = KeyedOptimizerWrapper(dict(in_backward_optimizer_filter(dmp.named_parameters())),
                                  lambda params: torch.optim.SGD(params, lr=lr))
    optimizer = CombinedOptimizer([dmp.fused_optimizer, dense])
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)  # no warm-up/decay
    pipeline = TrainPipelineSparseDist(dmp, optimizer, device)
    dmp.train()
    iterator = itertools.islice(iter(loader), args.steps)
    bar = tqdm(total=args.steps, disable=dist.get_rank() != 0 or not sys.stderr.isatty())
    started = None
    for step in range(args.steps):
        if step == WARMUP_STEPS:
            if device.type == "cuda":
                torch.cuda.synchronize()
            started = time.perf_counter()
        try:
            pipeline.progress(iterator)
        except StopIteration:
            break
        scheduler.step()
        bar.update(1)
    if device.type == "cuda":
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - started
    # `steps` progress() calls train exactly `steps` batches (the last two drain the pipeline)
    measured = (args.steps - WARMUP_STEPS) * args.batch_size * dist.get_world_size()
    if dist.get_rank() == 0:
        with open(args.result, "w") as fh:
            json.dump({"samples_per_sec": measured / elapsed}, fh)
    dist.barrier()
    dist.destroy_process_group()


# ----------------------------------------------------------------------------- ours
def ours_flags(args: argparse.Namespace, metrics: str) -> List[str]:
    flags = [f"--{k}={v}" for k, v in MODEL.items() if k != "num_embeddings"]
    # The reference cycles 10 cached batches; ours draws every batch fresh. One thread draws
    # ~1M samples/s (17 ms per 16k batch), which a GPU step outruns: give it reader processes.
    flags += [f"--data_workers={args.data_workers}"] if args.data_workers else []
    return flags + [f"--num_embeddings={args.num_embeddings}", f"--batch_size={args.batch_size}",
                    "--optimizer=sgd", f"--max_steps={args.steps}", f"--log_every={WARMUP_STEPS}",
                    "--eval_batches=0", f"--metrics_file={metrics}"]


def ours_result(metrics: str) -> float:
    """Global samples/s over the windows after the first (the warm-up), as the trainer logged them."""
    lines = [json.loads(line) for line in open(metrics) if line.strip()]
    windows = [r for r in lines if r["event"] == "train"][1:]
    samples = sum(r["samples_per_sec"] * (r["step_time_ms"] * WARMUP_STEPS / 1000) for r in windows)
    total_time = sum(r["step_time_ms"] * WARMUP_STEPS / 1000 for r in windows)
    return samples / total_time


# ----------------------------------------------------------------------------- driver
def torchrun(nproc: int) -> List[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", choices=["reference"], help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=2, help="alternating runs of each program")
    parser.add_argument("--steps", type=int, default=250, help=f"steps per run (first {WARMUP_STEPS} untimed)")
    parser.add_argument("--batch_size", type=int, default=512, help="per-rank batch")
    parser.add_argument("--num_embeddings", type=int, default=MODEL["num_embeddings"])
    parser.add_argument("--nproc", type=int, default=0, help="processes (default: GPUs, or 2 on CPU)")
    parser.add_argument("--data_workers", type=int, default=None,
                        help="our trainer's synthetic-data readers per rank (default: 4 on GPU, 0 on CPU)")
    args = parser.parse_args()
    if args.worker == "reference":
        reference_worker(args)
        return 0
    import torch

    nproc = args.nproc or torch.cuda.device_count() or 2
    if args.data_workers is None:
        args.data_workers = 4 if torch.cuda.is_available() else 0
    # the repo first, then whatever the caller had (a --target install of torchrec, say)
    pythonpath = os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": pythonpath,
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    print(f"DLRM {MODEL} x26 tables of {args.num_embeddings} rows, batch {args.batch_size}/rank, "
          f"SGD, {nproc} processes ({'GPU' if torch.cuda.is_available() else 'CPU'}), "
          f"{args.steps} steps, first {WARMUP_STEPS} untimed", flush=True)
    results = {"reference": [], "ours": []}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            for name in ("reference", "ours"):
                out = os.path.join(tmp, f"{name}-{round_}.json")
                if name == "reference":
                    cmd = torchrun(nproc) + [os.path.abspath(__file__), "--worker=reference", f"--result={out}",
                                             f"--steps={args.steps}", f"--batch_size={args.batch_size}",
                                             f"--num_embeddings={args.num_embeddings}"]
                else:
                    cmd = torchrun(nproc) + ["-m", "trainer", *ours_flags(args, out)]
                proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
                if proc.returncode != 0:
                    print(proc.stdout[-2000:], proc.stderr[-4000:], file=sys.stderr)
                    return proc.returncode
                value = ours_result(out) if name == "ours" else json.load(open(out))["samples_per_sec"]
                results[name].append(value)
                print(f"  round {round_ + 1} {name:9} {value:10,.0f} samples/s", flush=True)
    ref, ours = statistics.median(results["reference"]), statistics.median(results["ours"])
    print(f"reference (torchrec_dlrm/dlrm_main.py path): {ref:,.0f} samples/s (global, median)")
    print(f"ours      (python -m trainer):                {ours:,.0f} samples/s (global, median)")
    print(f"speed-up: {ours / ref:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
