"""The training metrics' cost against the training step, on this machine.

Per step every rank adds its batch to the window (``Window.add``: a histogram of logits per
label); per log step the ranks all-reduce the histogram and loss (``Window.reduce``). Before
issue 14 a log step all-gathered every logit and sorted them on every rank. This prints, for
batch 2048 and 8192 per rank: the real trainer's CPU step time (one process), the window's
per-step cost, and the log-step cost of both methods for the samples one log step holds on
16 GPUs (16 ranks x batch x --log_every 50 steps), as a share of the step. Then the exact AUC
of one evaluation (--auc_samples scores, MLPerf's validation set by default): the host's rank
sum (what rank 0 ran before) against the sort-based AUC on this machine's GPU, or its CPU.

    python bench/metric_bench.py [--steps 20] [--log_every 50] [--ranks 16] [--auc_samples N]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from trainer.config import parse_config  # noqa: E402
from trainer.distributed import DistContext  # noqa: E402
from trainer.metrics import Window, auc, auc_by_ranks  # noqa: E402
from trainer.train import AgreedBatches, StopFlag, Trainer  # noqa: E402


def train_step_ms(batch: int, steps: int) -> float:
    """Median wall time of one pipelined training step of the default DLRM, CPU, 1 rank."""
    cfg = parse_config(["--batch_size", str(batch), "--synthetic_steps_per_epoch", str(steps + 5),
                        "--eval_batches", "0"])
    ctx = DistContext(rank=0, world_size=1, local_rank=0, local_world_size=1,
                      device=torch.device("cpu"), control_group=None)
    trainer = Trainer(cfg, ctx, StopFlag())
    batches = AgreedBatches(trainer.source.train_batches(0, 0), steps + 5, StopFlag(), None)
    times = []
    try:
        for _ in range(steps + 5):
            started = time.perf_counter()
            trainer.pipeline.progress(batches)
            times.append(time.perf_counter() - started)
    finally:
        batches.close()
    return 1000 * float(np.median(times[5:]))


def window_add_ms(batch: int, repeats: int = 50) -> float:
    window = Window()
    logits, labels = torch.randn(batch) - 3.5, (torch.rand(batch) < 0.034).float()
    started = time.perf_counter()
    for _ in range(repeats):
        window.add(torch.tensor(0.5), logits, labels)
    return 1000 * (time.perf_counter() - started) / repeats


def log_step_ms(samples: int) -> tuple[float, float]:
    """(histogram reduce, the old gather+exact sort) for one log step of ``samples`` scores;
    communication is not counted for either (a world of one): only the host work."""
    logits = np.random.default_rng(0).normal(-3.5, 1.0, samples).astype(np.float32)
    labels = (np.random.default_rng(1).random(samples) < 0.034).astype(np.float32)
    window = Window()
    window.add(torch.tensor(0.5), torch.from_numpy(logits), torch.from_numpy(labels))
    started = time.perf_counter()
    window.reduce()
    histogram = time.perf_counter() - started
    started = time.perf_counter()
    auc_by_ranks(logits, labels)  # what every rank did with the gathered logits
    exact = time.perf_counter() - started
    return 1000 * histogram, 1000 * exact


def auc_seconds(samples: int, device: torch.device) -> tuple[float, float, float]:
    """(host rank sum s, sort-based s on ``device`` including the copy there, |difference|)
    for ``samples`` Criteo-like scores with ties (float32 logits, as gathered)."""
    rng = np.random.default_rng(0)
    labels = (rng.random(samples) < 0.034).astype(np.float32)
    logits = (rng.normal(-3.5, 1.0, samples) + labels).astype(np.float32)
    started = time.perf_counter()
    host = auc_by_ranks(logits.astype(np.float64), labels)
    host_s = time.perf_counter() - started
    auc(logits[:1000], labels[:1000], device)  # warm-up: kernels, allocator
    if device.type == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    on_device = auc(torch.from_numpy(logits), torch.from_numpy(labels), device)
    device_s = time.perf_counter() - started
    return host_s, device_s, abs(host - on_device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--log_every", type=int, default=50)
    parser.add_argument("--ranks", type=int, default=16)
    parser.add_argument("--auc_samples", type=int, default=89_137_319,
                        help="scores of one evaluation (MLPerf's validation set: 89,137,319)")
    args = parser.parse_args()
    torch.set_num_threads(max(1, (os.cpu_count() or 2)))
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("gloo", init_method=f"file://{tmp}/store", rank=0, world_size=1)
        print(f"{'batch':>6} {'train step':>11} {'window.add':>11} {'per step':>9} "
              f"{'log step: histogram':>20} {'old gather+sort':>16} {'(samples)':>12}")
        for batch in (2048, 8192):
            step = train_step_ms(batch, args.steps)
            add = window_add_ms(batch)
            samples = args.ranks * batch * args.log_every
            hist, exact = log_step_ms(samples)
            print(f"{batch:>6} {step:>9.1f}ms {add:>9.3f}ms {100 * add / step:>8.2f}% "
                  f"{hist:>9.1f}ms ({100 * hist / (step * args.log_every):.2f}%) "
                  f"{exact:>8.0f}ms ({100 * exact / (step * args.log_every):.0f}%) {samples:>12,}")
        dist.destroy_process_group()
    print("log-step shares are of the log_every steps the log covers; the old method also "
          "moved 8 bytes per sample to every rank (a 16-rank all_gather), not counted here.")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    host_s, device_s, diff = auc_seconds(args.auc_samples, device)
    print(f"exact AUC of {args.auc_samples:,} scores: host rank sum {host_s:.2f} s, sort-based "
          f"on {device.type} {device_s:.2f} s (copy included), |difference| {diff:.1e}")


if __name__ == "__main__":
    main()
