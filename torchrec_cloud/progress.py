"""Training progress from the bucket: the newest metrics record, an ETA, the newest checkpoint.

The trainer's rank 0 mirrors its metrics.jsonl to `<checkpoint_uri>/telemetry/metrics.jsonl`
(the telemetry contract of issue 23), one JSON object a line as trainer/metrics.py
MetricsLogger.record writes it: {"event": "train"|"eval"|"test"|"summary", "step": N, "loss",
"auc", "samples", "samples_per_sec", "step_time_ms", ...}, NaN written as null. When the bucket
cannot be read, rank 0's log has the same record as the line MetricsLogger.print writes:
`[train] step N  loss 0.1234  auc 0.7012  samples 65,536  samples_per_sec 12,345 ...`.

Checkpoints: `<checkpoint_uri>/step-N/`, complete once `.metadata` exists (DCP writes it last;
trainer/checkpoint.py). Nothing here imports torch.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from trainer.report import parse_records

STEP_DIR = re.compile(r"^step-(\d+)$")  # trainer/checkpoint.py _STEP_DIR
METADATA = ".metadata"
MAX_STEPS_FLAG = "--max_steps"  # trainer/config.py Config.max_steps
_LOG_LINE = re.compile(r"^\[(start|train|eval|test|summary)\] step (\d+)\s+(.*)$")
# trainer/train.py Trainer.save's line once a save has started, and its line after a resume.
_LOG_CHECKPOINT = re.compile(r"^(?:checkpoint step-(\d+): |resumed from checkpoint step-(\d+)$)")
_FLAGS = {"true": True, "false": False}  # trainer/metrics.py MetricsLogger.record prints flags so


def read_records(text: str) -> list[dict[str, Any]]:
    """metrics.jsonl's records with a step, oldest first (trainer/report.py parse_records: a
    line cut short by a concurrent append is skipped)."""
    return [record for record in parse_records(text) if "step" in record]


def records_from_log(log: str) -> list[dict[str, Any]]:
    """The records rank 0 printed, read back from its log lines; a save's line becomes a
    `checkpoint` record, as metrics.jsonl has it."""
    records: list[dict[str, Any]] = []
    for line in log.splitlines():
        saved = _LOG_CHECKPOINT.match(line.strip())
        if saved:
            records.append({"event": "checkpoint", "step": int(saved.group(1) or saved.group(2))})
            continue
        m = _LOG_LINE.match(line.strip())
        if not m:
            continue
        record: dict[str, Any] = {"event": m.group(1), "step": int(m.group(2))}
        words = m.group(3).split()
        for key, value in zip(words[::2], words[1::2]):
            if value in _FLAGS:
                record[key] = _FLAGS[value]
                continue
            try:
                number = float(value.replace(",", ""))
            except ValueError:
                continue
            record[key] = int(number) if number.is_integer() and "." not in value else number
        records.append(record)
    return records


def total_steps(records: list[dict[str, Any]], job: dict[str, Any] | None) -> int | None:
    """The run's last step: the newest `start` record's `total_steps` (trainer/train.py writes
    it: max_steps, or the epochs' steps when the run ends with its epochs), else the job's
    `--max_steps` flag in its pod template (the trainer's args; workloads/flags.py), for a
    trainer older than that record. None when neither says."""
    start = next((r for r in reversed(records) if r.get("event") == "start"), None)
    if start is not None and isinstance(start.get("total_steps"), int):
        return start["total_steps"]
    for args in _container_args(job):
        for i, arg in enumerate(args):
            if arg.startswith(f"{MAX_STEPS_FLAG}="):
                value = arg.split("=", 1)[1]
            elif arg == MAX_STEPS_FLAG and i + 1 < len(args):
                value = args[i + 1]
            else:
                continue
            if value.isdigit():
                return int(value)
    return None


def _container_args(job: dict[str, Any] | None) -> list[list[str]]:
    """Every container's command + args in the JobSet's (or PyTorchJob's) pod templates."""
    found: list[list[str]] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if "containers" in value and isinstance(value["containers"], list):
                for c in value["containers"]:
                    words = [*(c.get("command") or []), *(c.get("args") or [])]
                    found.append([w for word in words for w in _split(word)])
            for child in value.values():
                walk(child)
        elif isinstance(value, list):
            for child in value:
                walk(child)

    walk((job or {}).get("spec"))
    return found


def _split(word: str) -> list[str]:
    try:
        return shlex.split(word) if " " in word else [word]
    except ValueError:
        return [word]


@dataclass(frozen=True)
class Progress:
    step: int
    total: int | None
    samples_per_sec: float | None
    loss: float | None
    auc: float | None
    eta_seconds: float | None
    finished: bool
    eval_auc: float | None
    no_total: str = "the trainer has not said its total steps; no --max_steps"  # why total is None

    def line(self) -> str:
        of = f" of {self.total:,} ({100 * self.step / self.total:.0f}%)" if self.total else ""
        parts = [f"step {self.step:,}{of}"]
        if self.samples_per_sec is not None:
            parts.append(f"{self.samples_per_sec:,.0f} samples/s")
        if self.loss is not None:
            parts.append(f"loss {self.loss:.4f}")
        if self.auc is not None:
            parts.append(f"AUC {self.auc:.4f}")
        if self.eval_auc is not None:
            parts.append(f"eval AUC {self.eval_auc:.4f}")
        if self.finished:
            parts.append("finished")
        elif self.eta_seconds is not None:
            parts.append(f"ETA {duration(self.eta_seconds)}")
        elif self.total is None:
            parts.append(f"ETA unknown ({self.no_total})")
        return ", ".join(parts)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def progress(records: list[dict[str, Any]], total: int | None,
             no_total: str = Progress.no_total) -> Progress | None:
    """The newest training record, and the ETA from the steps left at its samples/s (samples
    per step from the record's window: its samples over the steps since the previous record).

    metrics.jsonl is appended across generations, and each generation ends with a `summary`
    (trainer/train.py): a summary means "finished" only when it is the newest of the run's
    records (no `train` or `start` after it: a re-run follows a finished run) and is not a
    preempted generation's."""
    train = [r for r in records if r.get("event", "train") == "train"]
    evals = [r for r in records if r.get("event") == "eval" and _number(r.get("auc")) is not None]
    last = next((r for r in reversed(records) if r.get("event", "train") in ("train", "start", "summary")),
                None)
    summary = last if last is not None and last.get("event") == "summary" and not last.get("preempted") \
        else None
    if not train and summary is None:
        return None
    newest = train[-1] if train else summary or {}
    step = int((summary or newest).get("step", 0))
    rate = _number(newest.get("samples_per_sec"))
    eta = None
    if total and rate and step < total:
        seconds_per_step = None
        previous = _window_start(records, newest)
        samples = _number(newest.get("samples"))
        if samples and newest.get("step", 0) > previous:
            seconds_per_step = samples / (newest["step"] - previous) / rate
        elif _number(newest.get("step_time_ms")):
            seconds_per_step = newest["step_time_ms"] / 1000
        if seconds_per_step:
            eta = (total - step) * seconds_per_step
    finished = summary is not None
    return Progress(step=step, total=total, samples_per_sec=rate, loss=_number(newest.get("loss")),
                    auc=_number(newest.get("auc")), eta_seconds=eta, finished=finished,
                    eval_auc=_number(evals[-1]["auc"]) if evals else None, no_total=no_total)


def _window_start(records: list[dict[str, Any]], newest: dict[str, Any]) -> int:
    """The step the newest train record's window began at: the record before it, a `train`
    one or a `start` (a resumed generation counts from its checkpoint)."""
    before = records[:next((i for i, r in enumerate(records) if r is newest), len(records))]
    return next((int(r.get("step", 0)) for r in reversed(before)
                 if r.get("event", "train") in ("train", "start")), 0)


def newest_save(records: list[dict[str, Any]]) -> int | None:
    """The newest step whose checkpoint save started (trainer/train.py writes a `checkpoint`
    record when a save starts; it completes in the background), or None."""
    steps = [int(r["step"]) for r in records if r.get("event") == "checkpoint"]
    return steps[-1] if steps else None


def duration(seconds: float) -> str:
    minutes = int(round(seconds / 60))
    if minutes < 60:
        return f"{max(minutes, 1)} min" if seconds >= 30 else f"{int(seconds)} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours < 48 else f"{hours // 24} d {hours % 24} h"


@dataclass(frozen=True)
class Checkpoint:
    step: int
    time: datetime | None


def newest_checkpoint(fs: Any, root: str) -> Checkpoint | None:
    """The newest step-N folder with its .metadata, and when that file was written."""
    fs.invalidate_cache()
    if not fs.exists(root):
        return None
    steps = []
    for entry in fs.ls(root, detail=False):
        m = STEP_DIR.match(entry.rstrip("/").rsplit("/", 1)[-1])
        if m:
            steps.append(int(m.group(1)))
    for step in sorted(steps, reverse=True):
        marker = f"{root}/step-{step}/{METADATA}"
        if fs.exists(marker):
            return Checkpoint(step, modified(fs, marker))
    return None


def modified(fs: Any, path: str) -> datetime | None:
    """When a file was last written, as the store reports it (local: mtime; S3: LastModified;
    GCS: updated; Azure: last_modified)."""
    try:
        info = fs.info(path)
    except (OSError, ValueError):
        return None
    for key in ("LastModified", "last_modified", "updated", "mtime", "created"):
        value = info.get(key)
        if isinstance(value, datetime):
            return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        if isinstance(value, (int, float)):
            return datetime.fromtimestamp(value, tz=timezone.utc)
        if isinstance(value, str):
            try:
                return datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                continue
    return None
