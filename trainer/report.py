"""A run at a glance, from its metrics.jsonl: ``training.png`` (loss, AUC and samples/s over
steps) and ``summary.json`` (final figures). No torch here: ``make train`` calls it after the
run, and ``python -m torchrec_cloud status`` on a laptop with metrics read from the bucket.

Records are the trainer's JSON lines (trainer/metrics.py): ``{"event": "train" | "eval" |
"test" | "summary" | "checkpoint" | ..., "step": N, ...}``; NaN was written as null. A run
resumed after a preemption appends to the same file, so a step may appear twice: the later
record wins (it is what the resumed run computed from the checkpoint on).
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, List, Optional, Tuple

PNG_NAME = "training.png"
SUMMARY_NAME = "summary.json"


def read_records(path: str) -> List[dict]:
    """The JSON records of a metrics.jsonl file (parse_records)."""
    with open(path) as fh:
        return parse_records(fh.read())


def parse_records(text: str) -> List[dict]:
    """The JSON records of metrics.jsonl text, oldest first; a last line cut short (a copy
    taken while the trainer was writing it) is skipped, not an error."""
    out: List[dict] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return out


def _number(value: Any) -> Optional[float]:
    """A finite number, else None (null, NaN, a bool, text)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _series(records: List[dict], event: str, key: str) -> Tuple[List[int], List[float]]:
    """(steps, values) of one metric of one event kind, by step, the last record of a step
    winning (a resumed run repeats steps after its checkpoint)."""
    by_step: Dict[int, float] = {}
    for r in records:
        if r.get("event") != event or not isinstance(r.get("step"), int):
            continue
        value = _number(r.get(key))
        if value is not None:
            by_step[r["step"]] = value
    steps = sorted(by_step)
    return steps, [by_step[s] for s in steps]


def summarize(records: List[dict]) -> Dict[str, Any]:
    """Final figures of the run; a metric the run did not produce is left out (no NaN, no
    null): e.g. test figures only where the data has a test split."""
    final = next((r for r in reversed(records) if r.get("event") == "summary"), None)
    trains = [r for r in records if r.get("event") == "train"]
    evals = [r for r in records if r.get("event") == "eval" and _number(r.get("auc")) is not None]
    tests = [r for r in records if r.get("event") == "test" and _number(r.get("auc")) is not None]
    steps = [r["step"] for r in records if isinstance(r.get("step"), int)]
    out: Dict[str, Any] = {"finished": final is not None and not final.get("preempted", False)}
    if steps:
        out["steps"] = max(steps)
    times = [t for t in (_number(r.get("time")) for r in records) if t is not None]
    if len(times) >= 2:
        out["wall_seconds"] = round(max(times) - min(times), 1)
    train_seconds = sum(r["samples"] / r["samples_per_sec"] for r in trains
                        if _number(r.get("samples")) and _number(r.get("samples_per_sec")))
    if train_seconds:
        out["train_seconds"] = round(train_seconds, 1)
    figures: Dict[str, Optional[float]] = {}
    if trains:
        figures["train_loss"] = _number(trains[-1].get("loss"))
        figures["train_auc"] = _number(trains[-1].get("auc"))
    if evals:
        figures["eval_loss"] = _number(evals[-1].get("loss"))
        figures["eval_auc"] = _number(evals[-1].get("auc"))
    if tests:
        figures["test_loss"] = _number(tests[-1].get("loss"))
        figures["test_auc"] = _number(tests[-1].get("auc"))
    rate = _number(final.get("samples_per_sec")) if final else None
    if rate is None and trains:
        rates = [v for v in (_number(r.get("samples_per_sec")) for r in trains) if v is not None]
        rate = sum(rates) / len(rates) if rates else None
    figures["samples_per_sec"] = rate
    out.update({k: v for k, v in figures.items() if v is not None})
    if final is not None:
        # target_reached: only a run with --validation_auroc has it (trainer/train.py).
        for key in ("world_size", "resumed_from", "preempted", "target_reached"):
            if final.get(key) is not None:
                out[key] = final[key]
        if final.get("malformed_rows"):
            out["malformed_rows"] = final["malformed_rows"]
    starts = sum(r.get("event") == "start" for r in records)
    if starts > 1:  # each generation (a resume after preemption or a fault) notes its start
        out["restarts"] = starts - 1
    saved = sorted({r["step"] for r in records
                    if r.get("event") == "checkpoint" and isinstance(r.get("step"), int)})
    skipped = sorted({r["step"] for r in records
                      if r.get("event") == "checkpoint_skipped" and isinstance(r.get("step"), int)})
    if saved:
        out["checkpoints"] = {"saved": len(saved), "last_step": saved[-1], "steps": saved}
        if skipped:  # due while the previous save was still being written (trainer/train.py)
            out["checkpoints"]["skipped_steps"] = skipped
    return out


def _plot(records: List[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display (a server, a CI runner, a pod)
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_auc, ax_rate) = plt.subplots(3, 1, figsize=(9, 10), sharex=True)
    fig.suptitle("DLRM training", fontsize=14)
    panels = (
        (ax_loss, "Loss (binary cross-entropy)", "loss", "lower is better"),
        (ax_auc, "ROC AUC", "auc", "higher is better"),
    )
    for ax, title, key, hint in panels:
        for event, label, style in (("train", "train (window since last log)", "-"),
                                    ("eval", "eval (held-out)", "o-"),
                                    ("test", "test", "s")):
            steps, values = _series(records, event, key)
            if steps:
                ax.plot(steps, values, style, label=label, markersize=4)
        ax.set_title(f"{title}: {hint}")
        ax.set_ylabel(key)
        ax.grid(True, alpha=0.3)
        if ax.has_data():
            ax.legend(loc="best", fontsize=9)
        else:
            ax.text(0.5, 0.5, "no records yet", ha="center", va="center", transform=ax.transAxes)
    steps, rates = _series(records, "train", "samples_per_sec")
    if steps:
        ax_rate.plot(steps, rates, "-", color="tab:green", label="samples/s (all ranks)")
        saved = sorted({r["step"] for r in records if r.get("event") == "checkpoint"
                        and isinstance(r.get("step"), int)})
        for n, step in enumerate(saved):  # a save's host copy pauses training: dips line up
            ax_rate.axvline(step, color="grey", linestyle=":", linewidth=1,
                            label="checkpoint saved" if n == 0 else None)
        ax_rate.legend(loc="best", fontsize=9)
    else:
        ax_rate.text(0.5, 0.5, "no records yet", ha="center", va="center",
                     transform=ax_rate.transAxes)
    ax_rate.set_title("Throughput")
    ax_rate.set_ylabel("samples/s")
    ax_rate.set_xlabel("step")
    ax_rate.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_report(records: List[dict], out_dir: str) -> Tuple[str, str]:
    """Write ``training.png`` and ``summary.json`` into ``out_dir`` (made if missing) from
    metrics.jsonl ``records``; returns their paths (png, summary)."""
    os.makedirs(out_dir, exist_ok=True)
    png = os.path.join(out_dir, PNG_NAME)
    summary = os.path.join(out_dir, SUMMARY_NAME)
    _plot(records, png)
    with open(summary, "w") as fh:
        json.dump(summarize(records), fh, indent=2, allow_nan=False)
        fh.write("\n")
    return png, summary
