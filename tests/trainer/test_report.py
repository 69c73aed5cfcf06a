"""training.png and summary.json from metrics.jsonl records (trainer/report.py): what `make
train` leaves in its folder and what `python -m torchrec_cloud status` draws from the bucket."""

import json
import math
import subprocess
import sys

from tests.trainer.helpers import REPO
from trainer.report import read_records, summarize, write_report


def _train(step, loss, auc, rate=1000.0, t=0.0):
    return {"event": "train", "step": step, "loss": loss, "auc": auc, "samples": 512,
            "samples_per_sec": rate, "time": t}


# A run preempted at step 20 (checkpoint at 10) and resumed from step 10 to its end at 30:
# steps 11-20 are trained twice, the second time is what the run went on from.
PREEMPTED_THEN_RESUMED = [
    {"event": "start", "step": 0, "resumed_from": None, "time": 100.0},
    _train(10, 0.70, 0.60, t=110.0),
    {"event": "checkpoint", "step": 10, "time": 110.5},
    _train(20, 0.65, 0.65, t=120.0),
    {"event": "summary", "step": 20, "loss": 0.65, "auc": 0.65, "preempted": True,
     "test_auc": None, "time": 121.0},
    {"event": "start", "step": 10, "resumed_from": 10, "time": 200.0},
    _train(20, 0.64, 0.66, t=210.0),
    {"event": "eval", "step": 30, "loss": 0.60, "auc": 0.70, "samples": 640, "time": 215.0},
    _train(30, 0.62, float("nan"), rate=2000.0, t=220.0),  # one class only in a window
    {"event": "checkpoint", "step": 30, "time": 221.0},
    {"event": "summary", "step": 30, "loss": 0.62, "auc": 0.70, "samples_per_sec": 1500.0,
     "resumed_from": 10, "preempted": False, "world_size": 2, "time": 222.0},
]


def test_summary_has_the_final_figures_and_only_metrics_that_exist():
    summary = summarize(PREEMPTED_THEN_RESUMED)
    assert summary["finished"] is True and summary["steps"] == 30
    assert summary["eval_auc"] == 0.70 and summary["eval_loss"] == 0.60
    assert summary["train_loss"] == 0.62 and "train_auc" not in summary  # NaN: left out
    assert not {"test_auc", "test_loss"} & summary.keys()  # no test split: no test figures
    assert summary["samples_per_sec"] == 1500.0  # the trainer's own figure for the run
    assert summary["wall_seconds"] == 122.0  # first start to last record
    assert summary["restarts"] == 1 and summary["resumed_from"] == 10
    assert summary["checkpoints"] == {"saved": 2, "last_step": 30, "steps": [10, 30]}


def test_a_save_skipped_while_the_previous_was_written_is_in_the_summary():
    """A slow store makes the trainer skip a due save (trainer/train.py): the user reads which
    steps were not saved, so the gap between checkpoints is not a mystery."""
    records = [{"event": "start", "step": 0, "time": 0.0},
               {"event": "checkpoint", "step": 4, "time": 1.0},
               {"event": "checkpoint_skipped", "step": 8, "in_flight": 4, "time": 2.0},
               {"event": "checkpoint", "step": 12, "time": 3.0}]
    assert summarize(records)["checkpoints"] == {"saved": 2, "last_step": 12, "steps": [4, 12],
                                                 "skipped_steps": [8]}


def test_target_reached_is_reported_only_for_a_run_that_had_a_target():
    """trainer/train.py writes target_reached only with --validation_auroc: without a target
    it could only say false, which reads as a failed run."""
    start = {"event": "start", "step": 0, "time": 0.0}
    end = {"event": "summary", "step": 8, "preempted": False, "world_size": 2, "time": 9.0}
    assert "target_reached" not in summarize([start, end])
    for reached in (True, False):  # a target met early, a target missed: both worth saying
        assert summarize([start, {**end, "target_reached": reached}])["target_reached"] is reached


def test_report_files_are_a_png_and_strict_json(tmp_path):
    png, summary = write_report(PREEMPTED_THEN_RESUMED, str(tmp_path / "report"))
    data = open(png, "rb").read()
    assert png.endswith("training.png") and data.startswith(b"\x89PNG\r\n\x1a\n")
    loaded = json.loads(open(summary).read(), parse_constant=lambda c: 1 / 0)  # NaN refused
    assert all(math.isfinite(v) for v in loaded.values() if isinstance(v, float))


def test_a_run_with_no_records_yet_still_gets_a_report(tmp_path):
    png, summary = write_report([], str(tmp_path))
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert json.loads(open(summary).read()) == {"finished": False}


def test_a_copy_cut_mid_line_reads_up_to_its_last_complete_record(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps(_train(10, 0.7, 0.6)) + "\n\n" + '{"event": "train", "st')
    assert [r["step"] for r in read_records(str(path))] == [10]


def test_the_report_module_imports_no_torch():
    # `status` runs on a laptop that need not have torch installed.
    code = "import sys, trainer.report; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)
