"""Resume on another world size (spot capacity lost, then back): a checkpoint written by
2 ranks goes on on 1 and again on 2, with the same global batch, the same samples in the
same order and the same held-out evaluation."""

import math

import pytest

from tests.trainer.helpers import TINY, records, run_trainer
from tests.trainer.test_train import _checkpoint_tensors
from trainer.train import Progress

K = 4  # steps per leg
GLOBAL_BATCH = 64  # TINY's --batch_size 32 x the 2 ranks of the first leg
COMMON = TINY + ["--log_every", "1", "--optimizer", "adagrad"]


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
    assert any(k.startswith("optim.state.model.sparse_arch") for k in by_one)  # fused row-wise state
    assert by_one["progress"].tolist() == [2 * K, 0, 2 * K * GLOBAL_BATCH, 1, GLOBAL_BATCH]


def test_a_world_size_that_does_not_divide_the_global_batch_is_refused_naming_the_flag():
    progress = Progress(step=8, global_batch=GLOBAL_BATCH, world_size=2)
    assert progress.per_rank_batch(4, step=8) == 16
    with pytest.raises(ValueError, match="--batch_size.*global batch of 64.*3 ranks"):
        progress.per_rank_batch(3, step=8)
