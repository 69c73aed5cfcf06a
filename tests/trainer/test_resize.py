"""Resume on another world size (spot capacity lost, then back): a checkpoint written by
2 ranks goes on on 1 and again on 2, with the same global batch, the same samples in the
same order and the same held-out evaluation, with data-parallel (replicated) tables in the
plan beside sharded ones."""

import math
import socket
import subprocess
import sys

import pytest

from tests.trainer.helpers import REPO, TINY, env, records, run_trainer
from tests.trainer.test_train import _checkpoint_tensors
from trainer.config import ConfigError
from trainer.exit_codes import CONFIG_ERROR
from trainer.train import Progress

K = 4  # steps per leg
GLOBAL_BATCH = 64  # TINY's --batch_size 32 x the 2 ranks of the first leg
# Half the tables 500 rows (16 KB: data-parallel under the 0.1 MB rule), half 5,000 (160 KB:
# sharded, fused row-wise Adagrad), whatever the world size.
MIXED = ["--num_embeddings_per_feature", ",".join(["500", "5000"] * 13),
         "--data_parallel_max_mb", "0.1"]
COMMON = TINY + MIXED + ["--log_every", "1", "--optimizer", "adagrad"]
DP_TABLE, SHARDED_TABLE = "t_cat_0", "t_cat_1"


def _losses(path):
    return {r["step"]: r["loss"] for r in records(path) if r["event"] == "train"}


def test_a_two_rank_checkpoint_resumes_on_one_rank_and_back_on_two(tmp_path):
    straight, resized = tmp_path / "straight.jsonl", tmp_path / "resized.jsonl"
    ckpt = tmp_path / "ckpt"
    run_trainer(COMMON + ["--max_steps", str(3 * K), "--metrics_file", str(straight)], nproc=2)
    for nproc, steps in ((2, K), (1, 2 * K), (2, 3 * K)):
        run_trainer(COMMON + ["--max_steps", str(steps), "--checkpoint_dir", str(ckpt),
                              "--metrics_file", str(resized)], nproc=nproc)

    legs = [(r["step"], r["world_size"], r["resumed_from"]) for r in records(resized) if r["event"] == "summary"]
    assert legs == [(K, 2, None), (2 * K, 1, K), (3 * K, 2, 2 * K)]

    # Evaluation just before each save and just after the resume on the other world size:
    # the same held-out samples, scored by the same weights.
    evals = [r for r in records(resized) if r["event"] == "eval"]
    assert [(e["step"], e["world_size"]) for e in evals] == [(K, 2), (K, 1), (2 * K, 1), (2 * K, 2), (3 * K, 2)]
    for before, after in ((evals[0], evals[1]), (evals[2], evals[3])):
        assert before["samples"] == after["samples"] == 2 * GLOBAL_BATCH  # --eval_batches 2
        assert before["positive_rate"] == after["positive_rate"]
        assert math.isclose(before["loss"], after["loss"], rel_tol=1e-5)
        assert math.isclose(before["auc"], after["auc"], rel_tol=1e-5)

    # Data position: every step trains on the samples of the uninterrupted 2-rank run (a
    # repeated or skipped batch changes the loss by far more than rounding does).
    want, got = _losses(straight), _losses(resized)
    assert sorted(got) == sorted(want) == list(range(1, 3 * K + 1))
    for step in want:
        assert math.isclose(got[step], want[step], rel_tol=1e-5), (step, got[step], want[step])
    assert got[K + 1] != got[K + 2]  # the 1-rank leg did not repeat a batch

    # The checkpoint of either world size has the same keys and shapes (so DCP reshards it),
    # and its data position counts global samples.
    by_two = _checkpoint_tensors(ckpt / f"step-{K}", tmp_path / "two.pt")
    by_one = _checkpoint_tensors(ckpt / f"step-{2 * K}", tmp_path / "one.pt")
    assert {k: tuple(v.shape) for k, v in by_two.items() if hasattr(v, "shape")} == \
        {k: tuple(v.shape) for k, v in by_one.items() if hasattr(v, "shape")}
    # Both kinds of table, trained: the replicated one by the dense optimizer (full-size
    # Adagrad sum), the sharded one by the fused row-wise one (one value per row).
    state = "optim.state.model.sparse_arch.embedding_bag_collection.embedding_bags"
    dp_sum = by_one[f"{state}.{DP_TABLE}.weight.sum"]
    rowwise = by_one[f"{state}.{SHARDED_TABLE}.weight.{SHARDED_TABLE}.momentum1"]
    assert tuple(dp_sum.shape) == (500, 8) and float(dp_sum.abs().sum()) > 0
    assert tuple(rowwise.shape) == (5000,) and float(rowwise.abs().sum()) > 0
    assert by_one["progress"].tolist() == [2 * K, 0, 2 * K * GLOBAL_BATCH, 1, GLOBAL_BATCH]

    # The end of the resized run evaluates as the uninterrupted run does.
    final = [r for r in records(straight) if r["event"] == "eval"][-1]
    assert final["step"] == evals[-1]["step"] == 3 * K
    assert math.isclose(final["loss"], evals[-1]["loss"], rel_tol=1e-5)
    assert math.isclose(final["auc"], evals[-1]["auc"], rel_tol=1e-5)


def test_a_world_size_that_does_not_divide_the_global_batch_is_refused_naming_the_flag():
    progress = Progress(step=8, global_batch=GLOBAL_BATCH, world_size=2)
    assert progress.per_rank_batch(4, step=8) == 16
    with pytest.raises(ConfigError, match="--batch_size.*global batch of 64.*3 ranks"):
        progress.per_rank_batch(3, step=8)


def test_a_resume_on_a_world_size_that_does_not_divide_the_global_batch_exits_config_error(tmp_path):
    """A 1-rank checkpoint of global batch 33 cannot go on on 2 ranks: the pod's status is
    CONFIG_ERROR (no retry can help), with a message naming the flag, not a crash."""
    ckpt = str(tmp_path / "ckpt")
    args = TINY + ["--batch_size", "33", "--max_steps", "1", "--checkpoint_dir", ckpt,
                   "--fabric_gate", "off"]
    run_trainer(args)
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    proc = subprocess.run([sys.executable, "-m", "trainer.launch", "--nnodes=1",
                           "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}",
                           "--nproc_per_node=2", "-m", "trainer", *args[:-4], "--max_steps", "2",
                           "--checkpoint_dir", ckpt, "--fabric_gate", "off"],
                          cwd=REPO, env=env(), capture_output=True, text=True, timeout=180)
    assert proc.returncode == CONFIG_ERROR, proc.stderr[-3000:]
    assert "config error: --batch_size: checkpoint step-1 trains with a global batch of 33" in proc.stderr
