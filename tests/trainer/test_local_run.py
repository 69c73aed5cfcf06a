"""`make train`: torchrun on 2 CPU processes (or every GPU), a brief synthetic run, each flag
once, one checkpoint kept, a plot and a summary in the run's folder, a TensorBoard command that
runs as printed."""

import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from tests.trainer.helpers import env
from trainer import local_run


def _flag_names(cmd):
    return [a.split("=", 1)[0] for a in cmd if a.startswith("--") and a != "--standalone"]


def test_local_run_launches_two_gloo_processes_and_user_flags_replace_defaults_in_place(monkeypatch):
    monkeypatch.setattr(local_run.torch.cuda, "device_count", lambda: 0)
    cmd = local_run.command("out/local/x", ["--max_steps", "7", "--eval_every=5",
                                            "--eval_batches", "-1", "--seed", "3"])
    assert cmd[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    assert cmd[5:7] == ["-m", "trainer"]
    counts = Counter(_flag_names(cmd))
    assert all(n == 1 for n in counts.values()), counts  # each flag once
    default_at = local_run.BRIEF.index("--max_steps")
    assert cmd[7 + default_at: 9 + default_at] == ["--max_steps", "7"]  # where the default stood
    assert cmd[cmd.index("--eval_every") + 1] == "5"
    assert cmd[cmd.index("--eval_batches") + 1] == "-1"  # a negative value is a value
    assert cmd[-2:] == ["--seed", "3"]  # no default: follows
    assert cmd[cmd.index("--keep_checkpoints") + 1] == "1"  # one 140 MB checkpoint, not three


def test_local_run_uses_every_gpu(monkeypatch):
    monkeypatch.setattr(local_run.torch.cuda, "device_count", lambda: 8)
    assert "--nproc_per_node=8" in local_run.command("out/local/x", [])


@pytest.mark.parametrize("args, line", [
    (["--maxsteps", "20"], "make train: --maxsteps='20': not a trainer flag; did you mean --max_steps?"),
    (["--max_step", "20"], "make train: --max_step='20': not a trainer flag; did you mean --max_steps?"),
])
def test_a_misspelt_or_shortened_flag_stops_make_train_on_one_line_before_anything_starts(
        tmp_path, args, line):
    """`make train ARGS="--maxsteps 20"`: the trainer's own parser names the flag it meant,
    before torchrun starts its ranks (each would print the error, then torchrun a traceback)
    and before the run's folder exists."""
    proc = subprocess.run([sys.executable, "-m", "trainer.local_run", *args], cwd=tmp_path,
                          env=env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"{line} python -m trainer --help lists them"]
    assert proc.stdout == ""  # no "training on ..." line: torchrun never started
    assert not (tmp_path / "out").exists()


def test_make_train_ends_with_a_plot_a_summary_one_checkpoint_and_a_working_tensorboard(tmp_path):
    """A fresh clone's `make train`, shortened: what it prints and leaves in out/local/<time>/."""
    small = ["--num_embeddings", "500", "--batch_size", "32", "--dense_arch_layer_sizes", "16,8",
             "--over_arch_layer_sizes", "16,1", "--embedding_dim", "8", "--eval_batches", "2",
             "--max_steps", "12", "--log_every", "4", "--eval_every", "6",
             "--checkpoint_every", "4"]
    proc = subprocess.run([sys.executable, "-m", "trainer.local_run", *small], cwd=tmp_path,
                          env=env(), capture_output=True, text=True, timeout=300)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    (run_dir,) = (tmp_path / "out" / "local").iterdir()

    echoed = shlex.split(next(line[2:] for line in out.splitlines() if line.startswith("$ ")))
    assert all(n == 1 for n in Counter(_flag_names(echoed)).values()), echoed

    png = (run_dir / "training.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["steps"] == 12 and summary["finished"] is True
    for key in ("train_loss", "train_auc", "eval_loss", "eval_auc", "samples_per_sec",
                "wall_seconds", "checkpoints"):
        assert key in summary, key
    assert not {"test_auc", "test_loss"} & summary.keys()  # synthetic data has no test split
    # No --validation_auroc, no target: nothing to say whether one was reached.
    assert "target_reached" not in summary and "target_reached" not in out
    numbers = [v for v in summary.values() if isinstance(v, float)]
    assert numbers and all(math.isfinite(v) for v in numbers)
    assert not re.search(r"\bnan\b", out.lower())  # neither the trainer's summary line nor the final figures

    assert sorted(p.name for p in (run_dir / "checkpoints").glob("step-*")) == ["step-12"]
    # Every due save is made, or said skipped when the one before is still being written (a
    # slow disk: how long a save takes is the machine's, not the test's); the last is made.
    kept = summary["checkpoints"]
    assert sorted(kept["steps"] + kept.get("skipped_steps", [])) == [4, 8, 12]
    assert kept["last_step"] == 12
    assert f"plot:        {os.path.relpath(run_dir / 'training.png', tmp_path)}" in out
    assert f"summary:     {os.path.relpath(run_dir / 'summary.json', tmp_path)}" in out

    # The TensorBoard line runs as printed, from where `make train` ran (.venv is not on PATH).
    tb_line = next(line for line in out.splitlines() if line.startswith("tensorboard: "))
    tb_cmd = shlex.split(tb_line.split(": ", 1)[1].split("  (", 1)[0])
    viewer = subprocess.Popen([*tb_cmd, "--port", "0"], cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True,
                              env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    try:
        deadline, said = time.monotonic() + 90, ""
        while not re.search(r"http://localhost:\d+/", said):
            line = viewer.stdout.readline()
            assert line or viewer.poll() is None, said[-2000:]
            assert time.monotonic() < deadline, said[-2000:]
            said += line
    finally:
        os.killpg(viewer.pid, signal.SIGTERM)
        viewer.wait(timeout=30)
