"""``make train``: a brief synthetic run on this machine through torchrun.

CPU: 2 processes on gloo. GPU: one process per local GPU on NCCL. Extra arguments are
trainer flags: one that is among the defaults here replaces that default where it stands, so
the echoed command names each flag once. Each invocation writes to a fresh
``out/local/<time>/`` so it trains instead of resuming, and ends with ``training.png`` and
``summary.json`` there (trainer/report.py), the final figures and how to open TensorBoard.
The flags are checked by the trainer's own parser first (trainer/config.py): a bad one is
named on one line, with the flag it most likely meant, before any folder or process exists.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from typing import List, Optional, Tuple

import torch

from trainer.config import FlagError, config_from_flags
from trainer.report import read_records, write_report

# Real model shape (trainer defaults), smaller tables and batch so 2 CPU cores finish in minutes.
# One checkpoint kept (the trainer's default is 3): a local run is a look, not a long job, and
# each checkpoint of this model is ~140 MB.
BRIEF = [
    "--num_embeddings", "20000",
    "--batch_size", "256",
    "--max_steps", "300",
    "--log_every", "25",
    "--eval_every", "150",
    "--eval_batches", "10",
    "--checkpoint_every", "100",
    "--keep_checkpoints", "1",
]
Flag = Tuple[str, Optional[str]]  # ("--name", value), value None for a bare flag


def parse_flags(argv: List[str]) -> List[Flag]:
    """``--name value`` and ``--name=value`` pairs, in order (every trainer flag takes a value;
    a value may start with one dash, e.g. ``--eval_batches -1``)."""
    out: List[Flag] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("--"):
            raise FlagError(f"{arg!r}: not a flag; ARGS are trainer flags, --name value")
        if "=" in arg:
            name, value = arg.split("=", 1)
            out.append((name, value))
            i += 1
        elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            out.append((arg, argv[i + 1]))
            i += 2
        else:
            out.append((arg, None))
            i += 1
    return out


def merge_flags(defaults: List[Flag], given: List[Flag]) -> List[Flag]:
    """``defaults`` with each flag ``given`` replacing the default of that name in place (its
    last value, as argparse would take it); flags without a default follow, in their order."""
    merged = list(defaults)
    names = [name for name, _ in merged]
    for name, value in given:
        if name in names:
            merged[names.index(name)] = (name, value)
        else:
            merged.append((name, value))
            names.append(name)
    return merged


def trainer_flags(run_dir: str, extra: List[str]) -> List[Flag]:
    defaults = parse_flags(BRIEF) + [
        ("--checkpoint_dir", os.path.join(run_dir, "checkpoints")),
        ("--metrics_file", os.path.join(run_dir, "metrics.jsonl")),
        ("--tensorboard_dir", os.path.join(run_dir, "tensorboard")),
    ]
    return merge_flags(defaults, parse_flags(extra))


def processes() -> int:
    """One per local GPU, else 2 CPU processes."""
    return torch.cuda.device_count() or 2


def _flat(flags: List[Flag]) -> List[str]:
    return [part for name, value in flags for part in ((name,) if value is None else (name, value))]


def command(run_dir: str, extra: List[str]) -> List[str]:
    return [
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        f"--nproc_per_node={processes()}", "-m", "trainer", *_flat(trainer_flags(run_dir, extra)),
    ]


def _shown(path: str) -> str:
    """A path as short as it can be printed: relative to here when it is under here."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def tensorboard_command(logdir: str) -> List[str]:
    """TensorBoard from this interpreter's environment (.venv is not on PATH): its console
    script beside the interpreter, else the module through the interpreter itself. The log
    folder is absolute, so the line works from any folder."""
    script = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    if os.access(script, os.X_OK):
        return [_shown(script), "--logdir", os.path.abspath(logdir)]
    return [_shown(sys.executable), "-m", "tensorboard.main", "--logdir", os.path.abspath(logdir)]


def main(argv: List[str]) -> int:
    run_dir = os.path.join("out", "local", time.strftime("%Y%m%d-%H%M%S"))
    try:  # what each rank would parse, on as many ranks: a bad flag stops here, nothing made
        config_from_flags(_flat(trainer_flags(run_dir, argv)), world_size=processes())
    except FlagError as err:
        print(f"make train: {err}", file=sys.stderr)
        return 2
    os.makedirs(run_dir, exist_ok=True)
    cmd = command(run_dir, argv)
    flags = dict(trainer_flags(run_dir, argv))
    device = f"{torch.cuda.device_count()} GPU(s), NCCL" if torch.cuda.is_available() else "CPU, 2 processes, gloo"
    print(f"training on {device}; outputs in {run_dir}\n$ {shlex.join(cmd)}", flush=True)
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    rc = subprocess.call(cmd, env=env)
    metrics = flags.get("--metrics_file")
    if not metrics or not os.path.exists(metrics):
        print(f"\nno metrics written ({metrics}): no report", flush=True)
        return rc
    png, summary_path = write_report(read_records(metrics), run_dir)
    with open(summary_path) as fh:
        summary = json.load(fh)
    print("\nfinal figures:")
    for key, value in summary.items():
        if isinstance(value, (dict, list)):
            continue
        shown = (str(value) if not isinstance(value, float) else f"{value:.1f}"
                 if key.endswith("_seconds") else f"{value:.4f}" if abs(value) < 1000
                 else f"{value:,.0f}")
        print(f"  {key:16} {shown}")
    kept = summary.get("checkpoints")
    if kept:
        print(f"  {'checkpoint':16} step-{kept['last_step']} in {flags.get('--checkpoint_dir')}")
    print(f"\nplot:        {png}\nsummary:     {summary_path}\nmetrics:     {metrics}")
    logdir = flags.get("--tensorboard_dir")
    if logdir:
        print(f"tensorboard: {shlex.join(tensorboard_command(logdir))}  (then open the URL it prints)")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
