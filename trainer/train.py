"""The train loop: pipelined steps, evaluation, checkpoints and preemption.

All ranks must take the same number of steps (every step has collectives). Two things
can end a stream early on one rank only: a SIGTERM (the spot notice) and running out of
data. ``AgreedBatches`` settles both with one tiny all-reduce per chunk of batches on a gloo
group, so every rank stops at the same batch; the pipeline then finishes the batches it
already holds and the loop ends at a step boundary. Evaluations take their batches the same
way, with the same stop flag, so a SIGTERM during an evaluation ends it (unrecorded) and the
run; a rank waiting for data looks at the flag while it waits. After a SIGTERM the state is
saved if the save fits --save_deadline_seconds and ``run()`` reports ``preempted``, which
trainer/__main__.py turns into the resume status (trainer/exit_codes.py).
"""

from __future__ import annotations

import logging
import math
import os
import signal
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np
import torch
import torch.distributed as dist
from torchrec.datasets.utils import Batch
from torchrec.distributed import TrainPipelineSparseDist

from trainer.checkpoint import CheckpointException, Checkpointer
from trainer.config import ConfigError, TrainConfig
from trainer.data.source import make_source
from trainer.data.loader import BatchStream, readers_for
from trainer.data.prefetch import Prefetched
from trainer.data.source import first_step
from trainer.distributed import DistContext, shard_model
from trainer.metrics import (MetricsLogger, Window, gather_to_first, held_out_figures,
                             held_out_order)
from trainer.model import build_model
from trainer.restarts import record_start
from trainer.schedule import eval_interval, learning_rate
from trainer.telemetry import TelemetryMirror

log = logging.getLogger(__name__)
# After SIGTERM: seconds kept for the summary, the final barrier and the exit after the save,
# and the margin on the save-time estimate (object-store throughput varies).
EXIT_RESERVE_SECONDS = 3.0
SAVE_ESTIMATE_MARGIN = 1.5
# Test hook: where set, every evaluation batch takes this many seconds longer and rank 0 writes
# the step to the file named by TEST_EVAL_STARTED_ENV as an evaluation starts, so a test can send
# its SIGTERM inside an evaluation without guessing how long one takes.
TEST_EVAL_DELAY_ENV = "TORCHREC_CLOUD_TEST_EVAL_DELAY_SECONDS"
TEST_EVAL_STARTED_ENV = "TORCHREC_CLOUD_TEST_EVAL_STARTED"
NOT_EVALUATED = -1  # the "evaluation" state of a checkpoint written before any evaluation
NO_AUC = -1.0  # its AUC then (or where the AUC is undefined): below any --validation_auroc


class StopFlag:
    """Set by SIGTERM; read at the next batch boundary. Remembers when the first came."""

    def __init__(self) -> None:
        self.requested = False
        self.received_at: Optional[float] = None  # time.monotonic() of the first SIGTERM

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.received_at is None:
            self.received_at = time.monotonic()
        self.requested = True

    def seconds_left(self, deadline_seconds: float) -> float:
        """Seconds until the process must have exited (inf when no SIGTERM came here)."""
        if self.received_at is None:
            return math.inf
        return self.received_at + deadline_seconds - time.monotonic()


class AgreedBatches:
    """Yield local batches while every rank has one, no stop was requested and the limit
    is not reached. ``reason`` says why it ended: 'limit', 'exhausted' or 'stop'.

    Ranks agree once per ``chunk`` batches (one all-reduce of [missing batches, stop]),
    not once per batch: a SIGTERM is acted on within ``chunk`` steps, and the all-reduce
    stays off most steps. Batches are built ahead: a ``BatchStream`` (the train stream,
    owned by the trainer for a whole epoch, or an evaluation's; left open here), or any iterator, then on a
    background thread closed with this object."""

    def __init__(self, batches: Iterator[Batch], limit: int, stop: StopFlag,
                 group: Optional[dist.ProcessGroup], chunk: int = 8, pin: bool = False,
                 save_due: Optional[Callable[[], bool]] = None) -> None:
        self.owned = not isinstance(batches, BatchStream)
        if self.owned:
            if pin:  # page-locked host memory lets the pipeline's copy stream overlap compute
                batches = (b.pin_memory() for b in batches)
            batches = Prefetched(batches, depth=2 * chunk)
        self.batches: Any = batches
        self.left = limit
        self.stop = stop
        self.group = group
        self.chunk = chunk
        self.ready: List[Batch] = []
        self.reason: Optional[str] = None
        # A time-based save is agreed in the same all-reduce: any rank due = all save, at
        # the same step (every rank refills at the same step of the pipeline).
        self.save_due = save_due or (lambda: False)
        self.save_requested = False

    def __iter__(self) -> "AgreedBatches":
        return self

    def close(self) -> None:
        """Stop the background thread it started (idempotent); a stream passed in stays open."""
        if self.owned:
            self.batches.close()

    def __next__(self) -> Batch:
        if not self.ready and self.reason is None:
            self._refill()
        if not self.ready:
            self.close()
            raise StopIteration
        self.left -= 1
        return self.ready.pop(0)

    def _refill(self) -> None:
        """Collective: all ranks take the same number of batches for the next chunk."""
        want = min(self.chunk, self.left)
        if want <= 0:  # the same on every rank: no need to ask the others
            self.reason = "limit"
            return
        local: List[Batch] = []
        stopped = lambda: self.stop.requested  # noqa: E731 (a SIGTERM during a data wait)
        while len(local) < want and (batch := self.batches.next_or_none(stopped)) is not None:
            local.append(batch)
        flags = torch.tensor([want - len(local), int(self.stop.requested), int(self.save_due())],
                             dtype=torch.int64)
        if dist.get_world_size() > 1:
            dist.all_reduce(flags, op=dist.ReduceOp.MAX, group=self.group)
        self.save_requested = self.save_requested or bool(flags[2])
        keep = want - int(flags[0])
        if flags[1]:
            self.reason = "stop"
        elif keep == 0:
            self.reason = "exhausted"
        else:
            self.ready = local[:keep]


@dataclass
class Progress:
    """Where training stands; saved in every checkpoint.

    The data position counts samples of the whole job, not batches of one rank, and the
    global batch is fixed by the first run: a checkpoint resumes on any world size that
    divides it, with no sample repeated or skipped and the lr schedule (a function of
    the step) unchanged."""

    step: int = 0  # completed global steps (global batches)
    epoch: int = 0
    sample_in_epoch: int = 0  # global samples of this epoch consumed = data position
    world_size: int = 1  # ranks of the run (of the run that wrote it, in a checkpoint)
    global_batch: int = 0  # samples per step over all ranks: --batch_size x first world size
    lr: float = 0.0

    def per_rank_batch(self, world_size: int, step: int) -> int:
        """The global batch split over ``world_size`` ranks; ValueError if it does not divide."""
        if self.global_batch % world_size:
            raise ConfigError(
                f"--batch_size: checkpoint step-{step} trains with a global batch of "
                f"{self.global_batch} samples (--batch_size x the world size of its first run), "
                f"kept on every resume; {world_size} ranks cannot split it evenly: resume on a "
                f"world size that divides {self.global_batch}")
        return self.global_batch // world_size


class Trainer:
    def __init__(self, cfg: TrainConfig, ctx: DistContext, stop: Optional[StopFlag] = None,
                 telemetry: Optional[TelemetryMirror] = None) -> None:
        self.cfg = cfg
        self.telemetry = telemetry  # rank 0's copy of its metrics to the bucket, or None
        self.ctx = ctx
        if ctx.device.type == "cuda" and cfg.tf32 == "on":  # MLPerf submissions train so
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        self.checkpointer = Checkpointer(cfg.checkpoint_dir, cfg.keep_checkpoints) if cfg.checkpoint_dir else None
        if self.checkpointer is not None:  # a load's timeout: no faster than a save's share
            self.checkpointer.read_bytes_per_second = cfg.checkpoint_write_mb_per_sec * 1e6
        self.progress = Progress(world_size=ctx.world_size, global_batch=cfg.batch_size * ctx.world_size)
        # The batch each rank will train on, known before the plan: after a resize it is the
        # checkpoint's global batch over this world size (a ConfigError if that does not divide).
        batch = self._resumed_per_rank_batch() or cfg.batch_size
        self.source = make_source(cfg, ctx.rank, ctx.world_size, batch)
        self.model, self.optimizer, self.dense_optimizer = shard_model(
            build_model(cfg, ctx.device), cfg, ctx, batch)
        self.pipeline = TrainPipelineSparseDist(self.model, self.optimizer, ctx.device)
        self.resized = False  # resumed from a checkpoint written by another world size
        self.stop = stop or StopFlag()
        self.window = Window()
        self.last: Dict[str, float] = {}
        self.last_eval: Dict[str, float] = {}
        self.resumed_from: Optional[int] = None
        self.stopped = False  # every rank agreed to stop (a SIGTERM): in training or evaluation
        self.evaluated_at: Optional[int] = None  # step of this run's last complete evaluation
        # The newest complete validation of the job (this run's, or the checkpoint's record of
        # an earlier run's): its step and AUC. Saved in every checkpoint, so a resume at an
        # evaluation step knows whether that evaluation was made (a SIGTERM may have cut it).
        # No NaN in it (-1: no AUC): checkpoints of equal runs stay equal bit for bit.
        self.evaluation_done: Tuple[int, float] = (NOT_EVALUATED, NO_AUC)
        self.save_after_eval = False  # a save due at an evaluation step waits for it
        self.segment_end = 0  # the step the running segment of training ends at
        self.eval_every = cfg.eval_every  # resolved from --evals_per_epoch in run()
        self.target_reached = False  # a validation AUC reached --validation_auroc
        self.skip_noted_for: Optional[int] = None  # the save in flight a skip was reported for

    # --- checkpoint state ---
    def state_dict(self) -> Dict[str, Any]:
        # Only optimizer *state*: param groups hold the lr, which the schedule recomputes.
        return {
            "model": self.model.state_dict(),
            "optim": {"state": self.optimizer.state_dict()["state"]},
            # Tensors (not Python ints) so DCP stores and restores them like everything else.
            "progress": torch.tensor([self.progress.step, self.progress.epoch,
                                      self.progress.sample_in_epoch, self.progress.world_size,
                                      self.progress.global_batch]),
            "lr": torch.tensor(self.progress.lr, dtype=torch.float64),
            # [step, AUC] of the newest complete validation (optional on load: older
            # checkpoints lack it, and are then taken as not evaluated at their step).
            "evaluation": torch.tensor(self.evaluation_done, dtype=torch.float64),
        }

    def restore(self) -> None:
        if self.checkpointer is None:
            return
        found = self._load_newest_loadable()
        if found is None:
            return
        step, state = found
        self.model.load_state_dict(state["model"])
        full = self.optimizer.state_dict()
        full["state"] = state["optim"]["state"]
        self.optimizer.load_state_dict(full)
        step_, epoch, sample_in_epoch, world_size, global_batch = (int(v) for v in state["progress"].tolist())
        self.progress = Progress(step_, epoch, sample_in_epoch, world_size, global_batch, float(state["lr"]))
        if "evaluation" in state:
            done_step, done_auc = state["evaluation"].tolist()
            self.evaluation_done = (int(done_step), float(done_auc))
        self._adopt_world_size(step)
        self.resumed_from = step

    def _adopt_world_size(self, step: int) -> None:
        """Go on with the checkpoint's global batch on this world size: each rank takes
        global batch / world size samples per step, so steps, samples and lr are unchanged."""
        batch = self.progress.per_rank_batch(self.ctx.world_size, step)
        self.resized = self.progress.world_size != self.ctx.world_size
        if batch != self.source.batch_size:  # an older checkpoint than the one planned for
            log.warning("checkpoint step-%d: keeping its global batch of %d samples, %d per rank "
                        "on %d ranks (--batch_size %d is used only by a fresh run)", step,
                        self.progress.global_batch, batch, self.ctx.world_size, self.cfg.batch_size)
            self.source = make_source(self.cfg, self.ctx.rank, self.ctx.world_size, batch)
        self.progress.world_size = self.ctx.world_size

    def _resumed_per_rank_batch(self) -> Optional[int]:
        """Per-rank batch of a resume from the newest complete checkpoint (its global batch
        over this world size), read before the model is planned; None for a fresh run or when
        it cannot be read here (restore() then falls back as it does)."""
        if self.checkpointer is None:
            return None
        step = self.checkpointer.latest()
        if step is None:
            return None
        box = {"progress": torch.zeros(5, dtype=torch.int64)}
        try:
            self.checkpointer.load(step, box)  # only the progress tensor is read
        except (Exception, CheckpointException) as err:  # noqa: BLE001
            log.warning("could not read the global batch of checkpoint step-%d: %s", step, err)
            return None
        global_batch = int(box["progress"][4])
        return Progress(global_batch=global_batch).per_rank_batch(self.ctx.world_size, step)

    def _load_newest_loadable(self) -> Optional[Tuple[int, Dict[str, Any]]]:
        """Load the newest complete checkpoint; one that fails to load falls back to the
        previous complete one. Incomplete ones (no .metadata) are removed first."""
        assert self.checkpointer is not None
        if self.ctx.rank == 0:
            self.checkpointer.remove_incomplete()
        steps = self.checkpointer.candidates()
        self._record_start(steps[0] if steps else None)
        for step in steps:
            # Lazily created optimizer state would silently not be restored: create it first.
            self.dense_optimizer.init_state()
            state = self.state_dict()
            try:
                # A failure on any rank raises on all.
                self.checkpointer.load(step, state, optional=("evaluation",))
            except (Exception, CheckpointException) as err:  # noqa: BLE001 (DCP's is a BaseException)
                log.warning("checkpoint step-%d could not be loaded, trying the previous "
                            "complete one: %s", step, err)
                continue
            return step, state
        if steps:
            raise RuntimeError(f"no complete checkpoint in {self.cfg.checkpoint_dir} could be "
                               f"loaded (tried steps {steps}); see the warnings above")
        return None

    def _record_start(self, step: Optional[int]) -> None:
        """Rank 0: this generation starts from checkpoint ``step`` (the newest complete one),
        recorded before it is loaded, so a load that fails or aborts the gang counts towards
        the bound on starts without progress (trainer/restarts.py): no resume that loops."""
        if self.ctx.rank != 0 or not self.cfg.checkpoint_dir:
            return
        try:
            record_start(self.cfg.checkpoint_dir, step)
        except Exception as err:  # noqa: BLE001 (a missing record only loosens that bound)
            log.warning("could not record this start in %s: %s", self.cfg.checkpoint_dir, err)

    def _previous_save_busy(self) -> bool:
        """Collective (only while a save is in flight, the same on every rank): whether any
        rank is still writing it."""
        assert self.checkpointer is not None
        if self.checkpointer.in_flight is None:
            return False
        busy = torch.tensor([int(self.checkpointer.busy())], dtype=torch.int64)
        if dist.get_world_size() > 1:
            dist.all_reduce(busy, op=dist.ReduceOp.MAX, group=self.ctx.control_group)
        return bool(busy.item())

    def save(self, blocking: bool = False) -> bool:
        """Start saving this step (collective); training goes on while it is written. A
        periodic save (not ``blocking``) due while the previous one is still being written on
        any rank is skipped, never queued: training would wait for the store. Said once per
        save in flight in metrics.jsonl ("checkpoint_skipped"), and the next due save is made."""
        if self.checkpointer is None:
            return False
        previous = self.checkpointer.in_flight
        if not blocking and self._previous_save_busy():
            if self.skip_noted_for != previous:
                self.skip_noted_for = previous
                self.metrics.note("checkpoint_skipped", self.progress.step, {"in_flight": previous})
                self.metrics.print(f"checkpoint step-{self.progress.step} skipped: step-{previous} "
                                   "is still being written (training does not wait for it)")
            return False
        self.progress.lr = learning_rate(self.cfg, self.progress.step)
        started = time.perf_counter()
        saved = self.checkpointer.save(self.progress.step, self.state_dict(), blocking=blocking)
        self.last_save_time = time.monotonic()
        if saved:
            self.metrics.note("checkpoint", self.progress.step, {"dir": self.cfg.checkpoint_dir})
            if self.telemetry is not None:
                self.telemetry.request()  # a checkpoint is a moment a reader wants to see
            rate = self.checkpointer.bytes_per_second
            written = (f"; step-{previous} took {self.checkpointer.last_seconds:.1f}s at "
                       f"{rate / 1e6:.0f} MB/s per rank" if previous is not None and rate else "")
            self.metrics.print(f"checkpoint step-{self.progress.step}: training paused "
                               f"{time.perf_counter() - started:.2f}s{written}")
        return saved

    def _save_due(self) -> bool:
        every = self.cfg.checkpoint_every_seconds
        return bool(every) and time.monotonic() - self.last_save_time >= every

    def _final_save(self, preempted: bool) -> None:
        """Save at the end and wait for it. After SIGTERM, only if the save can finish before
        --save_deadline_seconds; never block past it (the newest complete checkpoint is then
        the resume point). Every rank takes the same decision."""
        ckpt = self.checkpointer
        if ckpt is None:
            return
        if not preempted:
            self.save(blocking=True)
            return

        if self.stop.received_at is None:  # a peer's SIGTERM stopped this rank: its deadline
            self.stop.received_at = time.monotonic()  # started no later than now
        agreed_end = math.inf

        def left() -> float:
            own = self.stop.seconds_left(self.cfg.save_deadline_seconds) - EXIT_RESERVE_SECONDS
            return min(own, agreed_end - time.monotonic())

        previous_done = ckpt.wait(timeout=max(left(), 0.0))
        need = SAVE_ESTIMATE_MARGIN * ckpt.estimate_seconds(
            self.state_dict(), self.cfg.checkpoint_write_mb_per_sec * 1e6)
        agreed = torch.tensor([need, -left(), float(not previous_done)], dtype=torch.float64)
        if dist.get_world_size() > 1:
            dist.all_reduce(agreed, op=dist.ReduceOp.MAX, group=self.ctx.control_group)
        need, remaining, busy = float(agreed[0]), -float(agreed[1]), bool(agreed[2])
        agreed_end = time.monotonic() + remaining  # the earliest deadline of any rank
        if busy or need > remaining:
            why = "the previous save is still being written" if busy else \
                f"it needs ~{need:.1f}s, {max(remaining, 0):.1f}s are left"
            self.metrics.print(f"SIGTERM: no save at step {self.progress.step} ({why}); the "
                               f"newest complete checkpoint is the resume point")
            return
        self.save()
        if not ckpt.wait(timeout=max(left(), 0.0)):
            log.warning("SIGTERM: the save of step-%d did not finish before the deadline; it "
                        "stays incomplete and the previous checkpoint is the resume point",
                        self.progress.step)

    # --- loop ---
    def total_steps(self) -> Optional[int]:
        per_epoch = getattr(self.source, "steps_per_epoch", None)
        epochs_total = per_epoch * self.cfg.num_epochs if per_epoch else None
        if self.cfg.max_steps is None:
            return epochs_total
        return min(self.cfg.max_steps, epochs_total) if epochs_total else self.cfg.max_steps

    def _next_stop(self) -> int:
        """The step the current pipeline segment runs to: max_steps or the next eval."""
        end = self.cfg.max_steps if self.cfg.max_steps is not None else 1 << 62
        if self.eval_every:
            end = min(end, (self.progress.step // self.eval_every + 1) * self.eval_every)
        return end

    def _at_evaluation_step(self) -> bool:
        step = self.progress.step
        return bool(self.eval_every) and step > 0 and step % self.eval_every == 0

    def _evaluate_on_resume(self) -> None:
        """Before training on from a checkpoint: the evaluation of its step where one is due
        there and the checkpoint does not record it (a SIGTERM cut it, or the save came first),
        with the target's stop rule applied to it as in training; a recorded one that reached
        the target ends training here too. After a resize, the held-out samples are evaluated
        anyway (the same as before the save: checks the resharding)."""
        if self.resumed_from is None:
            return
        done_step, done_auc = self.evaluation_done
        missed = self._at_evaluation_step() and done_step != self.progress.step
        if missed:
            self.metrics.print(f"step {self.progress.step}: its evaluation is not in the "
                               "checkpoint (cut short by a stop); evaluating before training on")
        if missed or self.resized:
            result = self.evaluate()
            if missed:
                self._check_target(result)
        elif done_step == self.progress.step:
            self._check_target({"auc": done_auc})

    def _resolve_eval_every(self) -> int:
        if not self.cfg.evals_per_epoch:
            return self.cfg.eval_every
        return eval_interval(self.cfg, self.source.train_samples(), self.progress.global_batch)

    def run(self) -> Dict[str, Any]:
        self.restore()
        self.eval_every = self._resolve_eval_every()
        self.metrics = MetricsLogger(self.ctx.rank, self.total_steps(), self.cfg.metrics_file,
                                     self.cfg.tensorboard_dir, start_step=self.progress.step)
        # When this generation started (a reader tells the run's length and its restarts), and
        # the step it ends at (None: unbounded), so `status` shows "of N" and an ETA when the
        # run ends with its epochs and the job has no --max_steps.
        # Printed too, for a reader of rank 0's log alone.
        self.metrics.record("start", self.progress.step, {
            "resumed_from": self.resumed_from, "world_size": self.ctx.world_size,
            "total_steps": self.total_steps()})
        if self.resumed_from is not None:
            self.metrics.print(f"resumed from checkpoint step-{self.resumed_from}")
        self._evaluate_on_resume()
        started, start_step = time.perf_counter(), self.progress.step
        self.last_save_time = time.monotonic()
        reason = None
        self.model.train()
        stream: Optional[BatchStream] = None  # one per epoch, kept across evaluations
        try:
            while (self.progress.epoch < self.cfg.num_epochs and not self.stopped
                   and not self.target_reached):
                if self.cfg.max_steps is not None and self.progress.step >= self.cfg.max_steps:
                    break
                if stream is None:
                    stream = self._train_stream()
                self.segment_end = self._next_stop()
                batches = AgreedBatches(stream, self.segment_end - self.progress.step, self.stop,
                                        self.ctx.control_group, save_due=self._save_due)
                self._run_segment(batches)
                reason = batches.reason
                self.stopped = reason == "stop"
                if reason == "exhausted":
                    if self.progress.sample_in_epoch == 0:
                        raise RuntimeError("the training data has fewer rows than one global batch "
                                           "(--batch_size x ranks); check --dataset_path and --batch_size")
                    self.progress.epoch += 1
                    self.progress.sample_in_epoch = 0
                    stream.close()
                    stream = None
                elif reason == "limit" and self._at_evaluation_step():
                    self._check_target(self.evaluate())
                    if self.save_after_eval and not self.stopped and not self.target_reached:
                        self.save()  # records this evaluation (the final save does otherwise)
                self.save_after_eval = False
        finally:
            if stream is not None:
                stream.close()
        elapsed = time.perf_counter() - started
        if self.window.steps:
            self.last = self.window.reduce()
        evaluated_here = self.evaluated_at == self.progress.step  # this run, at this step
        if not self.stopped and not evaluated_here:  # a preempted run must exit fast: no eval
            self.evaluate()
        tested = self.evaluate("test") if not self.stopped else {}  # empty without a test set
        # A stop during the last evaluations is a stop too: the run did not reach its end
        # (its evaluation is missing), so it resumes, from this step, and evaluates then.
        preempted = self.stopped
        self._final_save(preempted)
        steps = self.progress.step - start_step
        # Only the figures this run produced: synthetic data has no test split, a run stopped
        # before its first log step has no training window (no NaN stand-ins to explain).
        produced = {
            "loss": self.last.get("loss"),
            "auc": self.last_eval.get("auc", self.last.get("auc")),
            "train_auc": self.last.get("auc"),
            "eval_loss": self.last_eval.get("loss"),
            "test_auc": tested.get("auc"),
            "test_loss": tested.get("loss"),
        }
        summary = {
            **{k: v for k, v in produced.items() if v is not None and v == v},
            "samples_per_sec": steps * self.progress.global_batch / elapsed if elapsed else 0.0,
            "resumed_from": self.resumed_from,
            "preempted": preempted,
            "malformed_rows": self._malformed_rows(),
            "world_size": self.ctx.world_size,
        }
        if self.cfg.validation_auroc is not None:  # without a target it could only be false
            summary["target_reached"] = self.target_reached
        self.metrics.record("summary", self.progress.step, summary)
        self.metrics.close()
        return summary

    def _train_stream(self) -> BatchStream:
        """This epoch's batches from the data position on. It stays positioned at the data
        position across segments: a segment takes exactly the batches it trains (its limit),
        and only the end of the epoch or a stop ends a stream."""
        return BatchStream(self.source, self.cfg, self.ctx.rank, self.ctx.world_size,
                           self.source.batch_size, "train", self.progress.epoch,
                           first_step(self.progress.sample_in_epoch, self.progress.global_batch),
                           workers=readers_for(self.cfg, self.source),
                           pin=self.ctx.device.type == "cuda")

    def _held_out_stream(self, split: str, count: Optional[int]) -> BatchStream:
        """The first ``count`` held-out global batches of ``split`` (None: all), built by the
        same reader processes as the train stream: on-the-fly multi-hot expands each batch to
        MLPerf's 214 ids a sample (~31 ms a 4,096-sample batch on one core), and one thread
        under the trainer's GIL made an MLPerf evaluation (~1,361 batches a rank) last ~40 s
        instead of a few. The readers hand batches over in global order: the scores, hence the
        AUC, are those of the in-process stream (tests/trainer/test_evaluation.py)."""
        return BatchStream(self.source, self.cfg, self.ctx.rank, self.ctx.world_size,
                           self.source.batch_size, split, 0, 0, count,
                           workers=readers_for(self.cfg, self.source),
                           pin=self.ctx.device.type == "cuda")

    def _run_segment(self, batches: AgreedBatches) -> None:
        """Pipelined steps until the stream ends; the pipeline drains what it holds."""
        while True:
            self._set_lr(learning_rate(self.cfg, self.progress.step))
            try:
                loss, logits, labels = self.pipeline.progress(batches)
            except StopIteration:
                return
            self.progress.step += 1
            self.progress.sample_in_epoch += self.progress.global_batch
            self.window.add(loss, logits, labels)
            self.metrics.advance()
            step = self.progress.step
            if step % self.cfg.log_every == 0:
                self.last = self.window.reduce()
                values = {**self.last, "lr": learning_rate(self.cfg, step - 1)}
                malformed = self._malformed_rows()
                if malformed:
                    values["malformed_rows"] = malformed
                self.metrics.record("train", step, values)
                self.window.reset()
            due = self.cfg.checkpoint_every and step % self.cfg.checkpoint_every == 0
            if due and (step == self.total_steps()
                        or step == self.segment_end and self._at_evaluation_step()):
                # Saved after the evaluation, so that the checkpoint says it was made: one cut by
                # a SIGTERM is then made on resume (_evaluate_on_resume), one that completed is not.
                # The run's last step is saved by the final save, after the final evaluation
                # (saved here, the final save found the step saved and the checkpoint said "not
                # evaluated", or, where this save was skipped for a busy store, said "evaluated").
                self.save_after_eval = True
            elif due or batches.save_requested:  # same step on every rank
                batches.save_requested = False
                self.save()

    def _set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def _malformed_rows(self) -> int:
        count = torch.tensor([self.source.malformed_rows], dtype=torch.int64)
        if dist.get_world_size() > 1:
            dist.all_reduce(count, group=self.ctx.control_group)
        return int(count.item())

    def _check_target(self, result: Dict[str, float]) -> None:
        """The reference's stop: a validation AUROC at or above --validation_auroc ends
        training (dlrm_main.py ``_train``: ``auroc_result >= validation_auroc``). Every rank
        has the same result (rank 0's, broadcast), so all stop at the same step."""
        target = self.cfg.validation_auroc
        if target is not None and result.get("auc", float("nan")) >= target:
            self.target_reached = True
            self.metrics.print(f"validation AUC {result['auc']:.5f} reached the target "
                               f"{target} at step {self.progress.step}: training ends")

    @torch.no_grad()
    def evaluate(self, split: str = "val") -> Dict[str, float]:
        """Held-out loss and AUC of ``split`` ('val', or 'test' once at the end where the data
        has a test set): the first --eval_batches held-out global batches (-1: all of them,
        the last partial one included, padded with rows labelled -1 that are not scored),
        each rank scoring its slice through the train pipeline in eval mode (no backward, no
        optimizer step; batch i+1's input all-to-all overlaps batch i's forward, as the
        reference's ``_evaluate``), then logits and labels gathered to rank 0 only, which
        computes the exact metrics once and broadcasts them: the same values on every rank,
        whatever the world size."""
        if self.cfg.eval_batches == 0 or self.stopped:
            return {}
        count = None if self.cfg.eval_batches < 0 else self.cfg.eval_batches
        stream = self._held_out_stream(split, count)
        # The run's own stop flag: a SIGTERM ends an evaluation within a chunk of batches, on
        # every rank at the same batch, and the partial result is dropped (a long held-out set
        # would otherwise outlast the deadline; the pod would be killed without a save).
        batches = AgreedBatches(_test_delayed(stream, self.ctx.rank, self.progress.step),
                                count if count is not None else 1 << 62,
                                self.stop, self.ctx.control_group)
        outputs: List[torch.Tensor] = []
        self.model.eval()
        try:
            while True:
                try:
                    _, out, y = self.pipeline.progress(batches)
                except StopIteration:
                    break
                outputs.append(torch.stack([out.reshape(-1).float(), y.reshape(-1).float()]))
        finally:
            batches.close()
            stream.close()
            self.model.train()
        if batches.reason == "stop":
            self.stopped = True
            self.metrics.print(f"SIGTERM during the {split} evaluation at step "
                               f"{self.progress.step}: stopped it, not recorded")
            return {}
        local = torch.cat(outputs, dim=1) if outputs else torch.zeros(2, 0, device=self.ctx.device)
        counts = torch.stack([(o[1] >= 0).sum() for o in outputs]).float().reshape(1, -1) \
            if outputs else torch.zeros(1, 0, device=self.ctx.device)
        local = local[:, local[1] >= 0]  # padding rows (label -1) are not samples
        gathered = held_out_order(gather_to_first(local), gather_to_first(counts),
                                  dist.get_world_size())
        figures = torch.full((4,), float("nan"), dtype=torch.float64)
        if gathered is not None and self.cfg.eval_scores_dir:
            os.makedirs(self.cfg.eval_scores_dir, exist_ok=True)
            np.save(os.path.join(self.cfg.eval_scores_dir, f"{split}-step-{self.progress.step}.npy"),
                    gathered.float().cpu().numpy())  # asked for: the only host copy
        if gathered is not None and gathered.shape[1]:  # rank 0, on its GPU where it has one
            figures = held_out_figures(gathered)
        if dist.get_world_size() > 1:
            dist.broadcast(figures, src=0, group=self.ctx.control_group)
        if math.isnan(float(figures[2])) or int(figures[2]) == 0:
            return {}
        result = {"loss": float(figures[0]), "auc": float(figures[1]),
                  "samples": int(figures[2]), "positive_rate": float(figures[3]),
                  "world_size": self.ctx.world_size}
        self.metrics.record("eval" if split == "val" else "test", self.progress.step, result)
        if split == "val":
            self.last_eval = result
            self.evaluated_at = self.progress.step
            self.evaluation_done = (self.progress.step, result["auc"] if math.isfinite(result["auc"])
                                    else NO_AUC)
        return result


def _test_delayed(batches: Iterator[Batch], rank: int, step: int) -> Iterator[Batch]:
    """``batches``, slowed by TEST_EVAL_DELAY_ENV's seconds each where a test set it (rank 0
    first says the evaluation started, in TEST_EVAL_STARTED_ENV's file); as they are otherwise."""
    delay = float(os.environ.get(TEST_EVAL_DELAY_ENV) or 0)
    if not delay:
        return batches
    started = os.environ.get(TEST_EVAL_STARTED_ENV)
    if started and rank == 0:
        with open(started, "a") as fh:
            fh.write(f"{step}\n")

    def slowed() -> Iterator[Batch]:
        for batch in batches:
            time.sleep(delay)
            yield batch

    return slowed()
