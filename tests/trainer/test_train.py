"""End to end, as users run it: learning, 2 ranks under torchrun, exact resume,
preemption (SIGTERM), incomplete checkpoints, checkpoints through fsspec."""

import os
import signal
import subprocess
import sys
import time

import torch
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

from tests.trainer.helpers import REPO, TINY, env, records, run_trainer, summary, trainer_cmd
from trainer.exit_codes import RESUME


def test_synthetic_signal_is_learnt_to_auc_075_within_300_steps(tmp_path):
    # Trainer defaults for model, optimizer, batch and data signal; tables shrunk from
    # 100k to 20k rows per feature so 2 CPU cores finish in seconds (100k reaches ~0.77 too).
    metrics = tmp_path / "m.jsonl"
    run_trainer(["--num_embeddings", "20000", "--max_steps", "300", "--log_every", "100",
                 "--metrics_file", str(metrics)])
    final = summary(metrics)
    assert final["step"] == 300
    assert final["auc"] >= 0.75, final  # held-out AUC
    evals = [r for r in records(metrics) if r["event"] == "eval"]
    assert evals and evals[-1]["samples"] == 20 * 512


def test_the_start_record_and_log_say_where_a_run_without_max_steps_ends(tmp_path):
    """The shipped job has no --max_steps: it ends with its epochs. `status` shows "step N of
    total" and an ETA from the start record (or, without the bucket, rank 0's log), and tells
    a finished run from a preempted one by the summary line's flag."""
    metrics = tmp_path / "m.jsonl"
    done = run_trainer(TINY + ["--synthetic_steps_per_epoch", "6", "--num_epochs", "2",
                               "--log_every", "3", "--metrics_file", str(metrics)])
    start = next(r for r in records(metrics) if r["event"] == "start")
    assert start["total_steps"] == 12 and start["step"] == 0
    assert summary(metrics)["step"] == 12
    lines = done.stdout.splitlines()
    assert "[start] step 0  world_size 1  total_steps 12" in lines
    final = next(line for line in lines if line.startswith("[summary] step 12 "))
    assert "  preempted false" in final
    assert "target_reached" not in final  # no --validation_auroc: no target to reach


def _flat(tree, prefix=""):
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _flat(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _checkpoint_tensors(step_dir, out):
    dcp_to_torch_save(str(step_dir), str(out))
    return dict(_flat(torch.load(out, weights_only=False)))


def test_two_ranks_resume_exactly_where_an_uninterrupted_run_would_be(tmp_path):
    common = TINY + ["--log_every", "10", "--eval_every", "20", "--optimizer", "adagrad"]
    straight, split = tmp_path / "straight", tmp_path / "split"
    run_trainer(common + ["--max_steps", "40", "--checkpoint_dir", str(straight),
                          "--metrics_file", str(straight / "m.jsonl"),
                          "--tensorboard_dir", str(tmp_path / "tb")], nproc=2)
    # The split run stores its checkpoints through fsspec (file:// URI), like s3:// or gs://.
    uri = f"file://{split}"
    run_trainer(common + ["--max_steps", "20", "--checkpoint_dir", uri,
                          "--metrics_file", str(split / "m.jsonl")], nproc=2)
    run_trainer(common + ["--max_steps", "40", "--checkpoint_dir", uri,
                          "--metrics_file", str(split / "m.jsonl")], nproc=2)

    a, b = summary(straight / "m.jsonl"), summary(split / "m.jsonl")
    assert a["world_size"] == 2 and a["resumed_from"] is None and b["resumed_from"] == 20
    assert a["step"] == b["step"] == 40
    assert a["loss"] == b["loss"] and a["auc"] == b["auc"]
    ta = _checkpoint_tensors(straight / "step-40", tmp_path / "a.pt")
    tb = _checkpoint_tensors(split / "step-40", tmp_path / "b.pt")
    assert ta.keys() == tb.keys()
    assert any(k.startswith("optim.state.model.sparse_arch") for k in ta)  # fused optimizer state
    assert any(k.endswith(".sum") and "over_arch" in k for k in ta)  # dense Adagrad state
    for key in ta:
        assert torch.equal(ta[key], tb[key]), key
    train_lines = [r for r in records(straight / "m.jsonl") if r["event"] == "train"]
    assert [r["step"] for r in train_lines] == [10, 20, 30, 40]
    assert all(r["samples_per_sec"] > 0 and 0 <= r["auc"] <= 1 for r in train_lines)
    assert any(name.startswith("events.out.tfevents") for name in os.listdir(tmp_path / "tb"))


def test_sigterm_saves_a_complete_checkpoint_and_the_next_run_resumes_from_it(tmp_path):
    ckpt, metrics = tmp_path / "ckpt", tmp_path / "m.jsonl"
    args = TINY + ["--log_every", "5", "--max_steps", "100000", "--checkpoint_dir", str(ckpt),
                   "--metrics_file", str(metrics)]
    proc = subprocess.Popen(trainer_cmd(args, nproc=2), cwd=REPO, env=env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    while not (metrics.exists() and metrics.read_text().count('"train"') >= 2):
        assert proc.poll() is None and time.time() < deadline, proc.communicate()[0][-3000:]
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)  # what Kubernetes sends to torchrun on a spot notice
    sent = time.time()
    output = proc.communicate(timeout=60)[0]
    assert time.time() - sent < 20, "a preempted run must save and exit within the notice"
    stopped = summary(metrics)
    assert stopped["preempted"] is True and stopped["step"] >= 10
    # Rank 0's log says so too: `status` reads it when the bucket cannot be read.
    printed = [line for line in output.splitlines() if line.startswith("[summary] step ")]
    assert printed and "  preempted true" in printed[-1], output[-3000:]
    step = stopped["step"]
    assert (ckpt / f"step-{step}" / ".metadata").exists()

    run_trainer(TINY + ["--max_steps", str(step + 5), "--checkpoint_dir", str(ckpt),
                        "--metrics_file", str(metrics)], nproc=2)
    resumed = summary(metrics)
    assert resumed["resumed_from"] == step and resumed["step"] == step + 5
    assert resumed["preempted"] is False


def test_sigterm_during_a_long_evaluation_stops_within_the_deadline_saves_and_resumes(tmp_path):
    """An evaluation of a large held-out set takes minutes: a SIGTERM in it must stop it (not
    recorded), save within --save_deadline_seconds and exit RESUME, as the pod's launcher does;
    the resumed run then evaluates that step."""
    ckpt, metrics, deadline = tmp_path / "ckpt", tmp_path / "m.jsonl", 20
    args = TINY + ["--log_every", "20", "--eval_every", "20", "--max_steps", "40",
                   "--checkpoint_dir", str(ckpt), "--metrics_file", str(metrics),
                   f"--save_deadline_seconds={deadline}", "--eval_batches", "200000"]  # ~minutes
    from tests.gang import free_port  # the launcher takes torchrun's options, not --standalone

    from trainer.train import TEST_EVAL_DELAY_ENV, TEST_EVAL_STARTED_ENV

    started = tmp_path / "eval-started"  # the hook: evaluation batches slowed, its start said
    hooked = {**env(), TEST_EVAL_DELAY_ENV: "0.01", TEST_EVAL_STARTED_ENV: str(started)}
    launcher = [sys.executable, "-m", "trainer.launch", "--nnodes=1", "--nproc_per_node=2",
                "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{free_port()}",
                "-m", "trainer", *args]
    proc = subprocess.Popen(launcher, cwd=REPO, env=hooked, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    end = time.time() + 120
    while not started.exists():  # step 20: the evaluation has started
        assert proc.poll() is None and time.time() < end, proc.communicate()[0][-3000:]
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)  # the kubelet's stop, to the pod's launcher
    sent = time.time()
    output = proc.communicate(timeout=120)[0]
    took = time.time() - sent
    assert proc.returncode == RESUME, output[-3000:]
    assert took < deadline, f"exited {took:.1f}s after SIGTERM, deadline {deadline}s"
    assert "SIGTERM during the val evaluation at step 20" in output, output[-3000:]
    stopped = summary(metrics)
    assert stopped["preempted"] is True and stopped["step"] == 20
    assert not [r for r in records(metrics) if r["event"] == "eval"]  # a partial one is dropped
    assert (ckpt / "step-20" / ".metadata").exists()  # the SIGTERM save, as in training

    run_trainer(TINY + ["--max_steps", "20", "--checkpoint_dir", str(ckpt),
                        "--metrics_file", str(metrics)], nproc=2)
    resumed = summary(metrics)
    assert resumed["resumed_from"] == 20 and resumed["preempted"] is False
    assert [r["step"] for r in records(metrics) if r["event"] == "eval"] == [20]


def test_an_evaluation_cut_by_sigterm_is_made_first_on_resume_and_its_target_stops_training(
        tmp_path):
    """`--eval_every 20 --max_steps 40` on 2 ranks, a checkpoint due at 20 too: the SIGTERM lands
    inside the step-20 evaluation (a test hook slows its batches and says when it started). The
    resumed run evaluates step 20 before it trains on, then 40: no evaluation lost. Resumed with
    a target that AUC reaches, it stops at 20 as the recipe's stop rule does."""
    import shutil

    ckpt, metrics, started = tmp_path / "ckpt", tmp_path / "m.jsonl", tmp_path / "eval-started"
    args = TINY + ["--log_every", "10", "--eval_every", "20", "--max_steps", "40",
                   "--checkpoint_every", "20", "--checkpoint_dir", str(ckpt),
                   "--metrics_file", str(metrics)]
    from tests.gang import free_port
    from trainer.train import TEST_EVAL_DELAY_ENV, TEST_EVAL_STARTED_ENV

    hooked = {**env(), TEST_EVAL_DELAY_ENV: "0.3", TEST_EVAL_STARTED_ENV: str(started)}
    launcher = [sys.executable, "-m", "trainer.launch", "--nnodes=1", "--nproc_per_node=2",
                "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{free_port()}",
                "-m", "trainer", *args, "--eval_batches", "1000"]
    proc = subprocess.Popen(launcher, cwd=REPO, env=hooked, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    end = time.time() + 180
    while not (started.exists() and started.read_text().split() == ["20"]):
        assert proc.poll() is None and time.time() < end, proc.communicate()[0][-3000:]
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)  # inside the step-20 evaluation: 1,000 batches x 0.3 s
    output = proc.communicate(timeout=120)[0]
    assert proc.returncode == RESUME, output[-3000:]
    assert "SIGTERM during the val evaluation at step 20" in output, output[-3000:]
    assert not [r for r in records(metrics) if r["event"] == "eval"]
    assert (ckpt / "step-20" / ".metadata").exists()
    shutil.copytree(ckpt, tmp_path / "ckpt-copy")

    run_trainer(args, nproc=2)
    resumed = [r for r in records(metrics) if r["event"] in ("start", "eval", "train")]
    after = resumed[[r["event"] for r in resumed].index("start", 1):]  # the resumed run's
    assert [(r["event"], r["step"]) for r in after] == [
        ("start", 20), ("eval", 20), ("train", 30), ("train", 40), ("eval", 40)]
    assert summary(metrics)["resumed_from"] == 20 and summary(metrics)["step"] == 40

    target = tmp_path / "target.jsonl"
    run_trainer([*args[:-4], "--checkpoint_dir", str(tmp_path / "ckpt-copy"),
                 "--metrics_file", str(target), "--validation_auroc", "0.01"], nproc=2)
    assert [r["step"] for r in records(target) if r["event"] == "eval"] == [20]
    assert summary(target)["step"] == 20 and summary(target)["target_reached"] is True


def test_the_last_checkpoint_records_the_final_evaluation_where_a_periodic_save_falls_on_it(
        tmp_path):
    """A finished run's checkpoint says its final evaluation was made, so a later run from it
    (more steps, a restart after completion) does not evaluate that step again. The periodic
    save due at the last step used to be written before the final evaluation: the checkpoint
    said "not evaluated", or, where that save was skipped for a busy store, "evaluated" (the
    gang's uninterrupted and resumed runs once differed so)."""
    ckpt, metrics = tmp_path / "ckpt", tmp_path / "m.jsonl"
    run_trainer(TINY + ["--max_steps", "8", "--checkpoint_every", "4", "--checkpoint_dir",
                        str(ckpt), "--metrics_file", str(metrics)])
    final = summary(metrics)
    tensors = _checkpoint_tensors(ckpt / "step-8", tmp_path / "final.pt")
    (key,) = [k for k in tensors if k.endswith("evaluation")]
    assert tensors[key].tolist() == [8.0, final["auc"]]
    assert (ckpt / "step-4" / ".metadata").exists()  # the periodic saves before it are kept


def test_incomplete_checkpoint_is_skipped_and_old_ones_pruned(tmp_path):
    ckpt, metrics = tmp_path / "ckpt", tmp_path / "m.jsonl"
    run_trainer(TINY + ["--max_steps", "6", "--checkpoint_every", "2", "--keep_checkpoints", "2",
                        "--checkpoint_dir", str(ckpt)])
    # The newest 2 complete ones are kept: step-6 and the periodic save before it (step-2 or
    # step-4: a save due while the previous one is still written is skipped, not queued).
    kept = sorted((d for d in os.listdir(ckpt) if d.startswith("step-")),
                  key=lambda d: int(d.split("-")[1]))
    assert len(kept) == 2 and kept[-1] == "step-6", kept
    assert all((ckpt / d / ".metadata").exists() for d in kept)
    # A save cut short by preemption: shards written, no .metadata.
    (ckpt / "step-8").mkdir()
    (ckpt / "step-8" / "__0_0.distcp").write_bytes(b"partial")
    run_trainer(TINY + ["--max_steps", "8", "--checkpoint_dir", str(ckpt), "--metrics_file", str(metrics)])
    final = summary(metrics)
    assert final["resumed_from"] == 6 and final["step"] == 8
    assert (ckpt / "step-8" / ".metadata").exists()  # the partial directory was replaced


def test_criteo_tsv_two_ranks_two_epochs_report_malformed_rows(tmp_path):
    from tests.trainer.test_data import BAD_TSV_ROWS, _write_tsv

    data = tmp_path / "criteo"
    data.mkdir()
    _write_tsv(data / "day_0", 300, BAD_TSV_ROWS)  # train (its two halves differ in size)
    _write_tsv(data / "day_1", 200)  # held out: the last day, halves for validation and test
    metrics = tmp_path / "m.jsonl"
    run_trainer(TINY + ["--dataset_path", str(data), "--num_epochs", "2", "--log_every", "2",
                        "--metrics_file", str(metrics)], nproc=2)
    final = summary(metrics)
    # 296 good rows, ~148 per rank, 32 per batch: 4 agreed steps per epoch, 2 epochs.
    assert final["step"] == 8
    assert final["malformed_rows"] == 2 * 4  # skipped rows, counted on each pass over the file
    assert final["eval_loss"] is not None and final["test_loss"] is not None
    assert final["preempted"] is False


def test_dcn_interaction_trains_sharded_and_pipelined_on_mlperf_multi_hot_ids(tmp_path):
    from tests.trainer.test_data import MLPERF_MULTI_HOT_SIZES

    metrics = tmp_path / "m.jsonl"
    run_trainer(TINY + ["--interaction", "dcn", "--dcn_num_layers", "2", "--dcn_low_rank_dim", "4",
                        "--multi_hot_sizes", ",".join(map(str, MLPERF_MULTI_HOT_SIZES)),
                        "--max_steps", "6", "--log_every", "3", "--metrics_file", str(metrics)])
    final = summary(metrics)
    assert final["step"] == 6 and final["loss"] == final["loss"]  # not NaN
