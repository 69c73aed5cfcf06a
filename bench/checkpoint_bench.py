"""Checkpoint cost, printed (not a timed test): per save, the wall time and the training stall
for synchronous (dcp.save) vs asynchronous (dcp.async_save: host copy, then a background
upload) saves; the measured bytes/second; the projection to MLPerf DLRM-DCNv2's exact-Adagrad checkpoint
(the sizing advisor's 209 GB, 15.4 GB on the fullest rank of 2 x p5.48xlarge);
and resume time against the step it resumes from (it should be flat).

A world of one on CPU, default trainer tables (26 x 100k rows, dim 64, row-wise Adagrad),
checkpoints to a local folder (--dir; point it at a shared file system or a mounted bucket to
measure that). ``python bench/checkpoint_bench.py [--saves 3] [--steps_between 20]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

# The MLPerf checkpoint the bench projects to: --recipe mlperf (exact Adagrad, one state value
# per weight) on 2 x p5.48xlarge, sized as the stack's settings and the sizing advisor size it
# (infra/preemption.py over trainer/sizing.py: 209 GB, 15.4 GB on torchrec's planner's fullest
# rank; tests/test_plan.py checks the three agree).
MLPERF_RECIPE = {"recipe": "mlperf"}
MLPERF_MACHINE, MLPERF_NODES, MLPERF_GPUS_PER_NODE = "p5.48xlarge", 2, 8


@dataclass(frozen=True)
class Projection:
    """MLPerf's checkpoint: the whole of it, and what its fullest rank writes (ranks write
    their shards in parallel, so that rank bounds a save)."""

    checkpoint_bytes: int
    fullest_rank_bytes: int
    ranks: int

    def save_seconds(self, bytes_per_second_per_rank: float) -> float:
        return self.fullest_rank_bytes / bytes_per_second_per_rank


def mlperf_projection() -> Projection:
    from infra.preemption import checkpoint_bytes, largest_rank_bytes

    ranks = MLPERF_NODES * MLPERF_GPUS_PER_NODE
    return Projection(checkpoint_bytes(MLPERF_RECIPE),
                      largest_rank_bytes(MLPERF_RECIPE, ranks, MLPERF_GPUS_PER_NODE,
                                         MLPERF_MACHINE), ranks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--saves", type=int, default=3)
    parser.add_argument("--steps_between", type=int, default=20)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    import torch.distributed as dist

    from trainer.checkpoint import Checkpointer, state_bytes
    from trainer.config import parse_config
    from trainer.distributed import init_distributed
    from trainer.train import Trainer

    root = args.dir or tempfile.mkdtemp(prefix="ckpt-bench-")
    cfg = parse_config(["--checkpoint_dir", root, "--eval_batches", "0", "--log_every", "100000"])
    ctx = init_distributed()
    trainer = Trainer(cfg, ctx)
    trainer.dense_optimizer.init_state()
    nbytes = state_bytes(trainer.state_dict())
    print(f"state: 26 tables x {cfg.num_embeddings:,} rows x dim {cfg.embedding_dim} + row-wise "
          f"Adagrad + dense = {nbytes / 1e9:.2f} GB on 1 rank (CPU), checkpoints in {root}")

    import itertools

    stream = trainer.source.train_batches(0, 0)  # synthetic: endless enough for the bench

    def steps(n: int) -> float:
        """Train n steps; seconds."""
        batches = itertools.islice(stream, n)
        started = time.perf_counter()
        while True:
            try:
                trainer.pipeline.progress(batches)
            except StopIteration:
                break
            trainer.progress.step += 1
        return time.perf_counter() - started

    steps(10)  # warm-up (pipeline tracing)
    step_time = steps(args.steps_between) / args.steps_between
    print(f"training step: {step_time * 1e3:.0f} ms (batch {cfg.batch_size})")
    ckpt: Checkpointer = trainer.checkpointer
    results = {}
    for mode in ("sync", "async"):
        walls, stalls = [], []
        for _ in range(args.saves):
            steps(args.steps_between)
            state = trainer.state_dict()
            started = time.perf_counter()
            ckpt.save(trainer.progress.step, state, blocking=(mode == "sync"))
            stall = time.perf_counter() - started
            if mode == "async":  # training goes on; the upload ends in the background
                stall += max(0.0, steps(args.steps_between) - args.steps_between * step_time)
                ckpt.wait()
            walls.append(ckpt.last_seconds)
            stalls.append(stall)
        results[mode] = (walls, stalls, ckpt.bytes_per_second)
        print(f"{mode}: save {min(walls):.2f}-{max(walls):.2f} s, training stalled "
              f"{min(stalls):.2f}-{max(stalls):.2f} s per checkpoint, "
              f"{ckpt.bytes_per_second / 1e6:.0f} MB/s")
    rate = results["async"][2]
    mlperf = mlperf_projection()
    print(f"MLPerf DLRM-DCNv2 (--recipe mlperf, exact Adagrad): {mlperf.checkpoint_bytes / 1e9:.0f} "
          f"GB; on {MLPERF_NODES} x {MLPERF_MACHINE} the fullest of {mlperf.ranks} ranks writes "
          f"{mlperf.fullest_rank_bytes / 1e9:.1f} GB: at {rate / 1e6:.0f} MB/s per rank a save "
          f"takes {mlperf.save_seconds(rate):.0f} s (each rank writes its shards)")

    # Resume time against the step resumed from.
    print("resume (load of the newest checkpoint) against its step:")
    print(f"  (folders: {sorted(os.listdir(root))})")
    for step in ckpt.complete_steps():
        state = trainer.state_dict()
        started = time.perf_counter()
        ckpt.load(step, state)
        print(f"  step {step:>4}: {time.perf_counter() - started:.2f} s")
    data_seek_times(cfg.table_sizes, cfg.batch_size)
    dist.destroy_process_group()
    if args.dir is None:
        shutil.rmtree(root, ignore_errors=True)


def data_seek_times(table_sizes: list, batch_size: int, rows: int = 400_000) -> None:
    """Time to the first batch when resuming at a data position, for each format: it should
    not grow with the position (a seek, not a re-read of the consumed rows)."""
    import numpy as np

    from trainer.data.criteo import CriteoSource

    folder = tempfile.mkdtemp(prefix="seek-bench-")
    rng = np.random.default_rng(0)
    tsv = os.path.join(folder, "day_0")
    with open(tsv, "w") as out:
        ints = rng.integers(0, 100, (rows, 13))
        cats = rng.integers(0, 1 << 31, (rows, 26))
        for i in range(rows):
            out.write("\t".join([str(i % 2), *map(str, ints[i]), *(f"{c:08x}" for c in cats[i])]) + "\n")
    npy = os.path.join(folder, "npy")
    os.mkdir(npy)
    for day in (0, 1):
        np.save(f"{npy}/day_{day}_dense.npy", rng.random((rows, 13), dtype=np.float32))
        np.save(f"{npy}/day_{day}_sparse.npy", rng.integers(0, 1000, (rows, 26)))
        np.save(f"{npy}/day_{day}_labels.npy", rng.integers(0, 2, (rows, 1)))
    print(f"resume seek: time to the first batch at a data position ({rows:,} rows per file):")
    for label, path in (("TSV", tsv), (".npy", npy)):
        source = CriteoSource(path, table_sizes, batch_size, rank=0, world_size=1)
        next(iter(source.train_batches(0, 0)))  # builds the TSV line index once (a newline scan)
        times = []
        for fraction in (0.0, 0.5, 0.95):
            position = int(rows * fraction * (0.9 if label == "TSV" else 1)) // batch_size * batch_size
            started = time.perf_counter()
            next(iter(source.train_batches(0, position)))
            times.append(f"{position:>7,}: {(time.perf_counter() - started) * 1e3:.1f} ms")
        print(f"  {label:>4}  " + "   ".join(times))
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
