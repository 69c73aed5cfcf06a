"""``make train``: a brief synthetic run on this machine through torchrun.

CPU: 2 processes on gloo. GPU: one process per local GPU on NCCL. Extra arguments are
passed to the trainer and win over the defaults here (argparse keeps the last value).
Each invocation writes to a fresh ``out/local/<time>/`` so it trains instead of resuming.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import List

import torch

# Real model shape (trainer defaults), smaller tables and batch so 2 CPU cores finish in minutes.
BRIEF = [
    "--num_embeddings", "20000",
    "--batch_size", "256",
    "--max_steps", "300",
    "--log_every", "25",
    "--eval_every", "150",
    "--eval_batches", "10",
    "--checkpoint_every", "100",
]


def command(run_dir: str, extra: List[str]) -> List[str]:
    gpus = torch.cuda.device_count()
    nproc = gpus if gpus else 2
    return [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
        "-m", "trainer", *BRIEF,
        "--checkpoint_dir", os.path.join(run_dir, "checkpoints"),
        "--metrics_file", os.path.join(run_dir, "metrics.jsonl"),
        "--tensorboard_dir", os.path.join(run_dir, "tensorboard"),
        *extra,
    ]


def main(argv: List[str]) -> int:
    run_dir = os.path.join("out", "local", time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(run_dir, exist_ok=True)
    cmd = command(run_dir, argv)
    device = f"{torch.cuda.device_count()} GPU(s), NCCL" if torch.cuda.is_available() else "CPU, 2 processes, gloo"
    print(f"training on {device}; outputs in {run_dir}\n$ {' '.join(cmd)}", flush=True)
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    rc = subprocess.call(cmd, env=env)
    summary = _summary(os.path.join(run_dir, "metrics.jsonl"))
    if summary:
        print("\nfinal metrics:")
        for key in ("step", "loss", "auc", "train_auc", "eval_loss", "samples_per_sec", "resumed_from", "preempted"):
            print(f"  {key:16} {summary.get(key)}")
        print(f"  tensorboard      tensorboard --logdir {os.path.join(run_dir, 'tensorboard')}")
    return rc


def _summary(path: str) -> dict:
    try:
        with open(path) as fh:
            records = [json.loads(line) for line in fh if line.strip()]
    except OSError:
        return {}
    return next((r for r in reversed(records) if r.get("event") == "summary"), {})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
