"""How often the job saves: a cadence derived from one save's time, so that saving takes a
bounded share of the run, and what a preemption may lose with it.

The trainer's saves are asynchronous (trainer/checkpoint.py): training stalls only while the
state is copied to host memory, then goes on while the copy is written. A save falling due
while the previous one is still being written is skipped, never queued (queued, it stalled
training: MLPerf's 209 GB exact-Adagrad checkpoint, ~180 s a save to S3, behind a save every 500
steps held 2 x 8 H100 to 500 steps per save instead of ~120 steps/s). Writing still shares the
host's memory bandwidth, its CPUs and its network with training, and skipped saves stretch the
interval silently: so the interval is at least one save's time / ``SAVE_SHARE``.

Saves by steps (``checkpoints.everySteps``) need the job's steps per second: the run estimate's
planned throughput (infra/throughput.py). Unset, ``everySteps`` and ``everySeconds`` are derived
here; set, a value under the bound is refused (infra/settings/rules.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from infra.preemption import SaveEstimate, estimated_save, stop_budget

if TYPE_CHECKING:
    from infra.settings.model.checkpoints import Checkpoints
    from infra.settings.model.stack_file import Settings

# A save is written at most this share of the run's time.
SAVE_SHARE = 0.10
# The cadence of a job whose saves take seconds (and of one whose throughput is not planned).
DEFAULT_EVERY_STEPS = 500
DEFAULT_EVERY_SECONDS = 600  # spot pools only (workloads/flags.py)


@dataclass(frozen=True)
class Cadence:
    """The job's save cadence in effect, and the figures it comes from."""

    save: SaveEstimate
    steps_per_second: float | None  # planned (infra/throughput.py); None: not planned
    every_steps: int
    every_seconds: int  # on spot pools; on-demand pools save by steps only
    steps_derived: bool  # checkpoints.everySteps was unset
    seconds_derived: bool

    @property
    def save_seconds(self) -> float:
        return self.save.seconds

    @property
    def least_interval_seconds(self) -> float:
        """The shortest interval at which a save is written at most SAVE_SHARE of the time."""
        return self.save_seconds / SAVE_SHARE

    def least_steps(self) -> int | None:
        """The fewest steps between saves (None: the throughput is not planned)."""
        if self.steps_per_second is None:
            return None
        return round_up(self.least_interval_seconds * self.steps_per_second, 100)

    def interval_seconds(self, spot: bool) -> float | None:
        """Seconds between two saves: by steps at the planned rate, by time on spot where that
        comes first."""
        by_steps = (self.every_steps / self.steps_per_second if self.steps_per_second else None)
        by_time = float(self.every_seconds) if spot and self.every_seconds else None
        found = [t for t in (by_steps, by_time) if t is not None]
        return min(found) if found else None


def minutes(seconds: float) -> str:
    """Minutes as a reader takes them in: one decimal under 10, whole ones above."""
    value = seconds / 60
    return f"{value:,.1f}" if value < 10 else f"{value:,.0f}"


def round_up(value: float, unit: int) -> int:
    return max(unit, int(math.ceil(value / unit)) * unit)


def steps_per_second(s: "Settings") -> float | None:
    """Global steps a second at the run estimate's planned throughput (None: not planned)."""
    from infra.estimate import run_steps
    from infra.throughput import planned_throughput

    planned = planned_throughput(s)
    if planned is None:
        return None
    gpus = s.job.nodes * s.job.processes_per_node
    return planned.samples_per_s_per_gpu * gpus / run_steps(s).global_batch


def derived_every(save_seconds: float, rate: float | None) -> tuple[int, int]:
    """Steps and seconds between saves so that one save of ``save_seconds`` is written at most
    SAVE_SHARE of the time at ``rate`` steps a second (None: not planned, DEFAULT_EVERY_STEPS):
    the stack's derived checkpoints.everySteps / everySeconds, and the sizing advisor's cadence
    (torchrec_cloud/plan.py), one rule."""
    least = save_seconds / SAVE_SHARE
    steps = DEFAULT_EVERY_STEPS
    if rate is not None:
        steps = max(DEFAULT_EVERY_STEPS, round_up(least * rate, 100))
    return steps, max(DEFAULT_EVERY_SECONDS, round_up(least, 60))


def cadence(s: "Settings") -> Cadence:
    """The stack's cadence: checkpoints.everySteps / everySeconds where set, else derived from
    one save's time (infra/preemption.estimated_save) and the planned steps per second."""
    save = estimated_save(s)
    rate = steps_per_second(s)
    c = s.checkpoints
    derived_steps, derived_seconds = derived_every(save.seconds, rate)
    return Cadence(save=save, steps_per_second=rate,
                   every_steps=c.every_steps if c.every_steps is not None else derived_steps,
                   every_seconds=(c.every_seconds if c.every_seconds is not None
                                  else derived_seconds),
                   steps_derived=c.every_steps is None, seconds_derived=c.every_seconds is None)


def checkpoints_in_effect(s: "Settings") -> "Checkpoints":
    """settings.checkpoints with the derived cadence filled in where unset (what the trainer
    is given: workloads/flags.py). Where the table sizes cannot be judged (a refused flag: its
    own rule names it), the defaults."""
    c = s.checkpoints
    if c.every_steps is not None and c.every_seconds is not None:
        return c
    try:
        found = cadence(s)
        steps, seconds = found.every_steps, found.every_seconds
    except (KeyError, TypeError, ValueError):
        steps, seconds = DEFAULT_EVERY_STEPS, DEFAULT_EVERY_SECONDS
    return c.model_copy(update={"every_steps": c.every_steps or steps,
                                "every_seconds": (c.every_seconds if c.every_seconds is not None
                                                  else seconds)})


def preemption_loss(s: "Settings") -> str | None:
    """What a stop may lose, for `check`: a spot node's preemption, or an on-demand node's drain
    (job.terminationGraceSeconds): nothing where the stop-time save fits the trainer's deadline,
    else up to one interval, in steps and minutes. None without checkpoints."""
    from infra.settings.model.job import PoolChoice

    if not s.checkpoints.enabled:
        return None
    spot = s.job.pool == PoolChoice.SPOT
    found = cadence(s)
    budget = stop_budget(s.cloud, spot, s.job.termination_grace_seconds, s.kubernetes.version)
    interval = found.interval_seconds(spot)
    steps = (min(found.every_steps, round(interval * found.steps_per_second))
             if found.steps_per_second and interval else found.every_steps)
    lost = f"up to one interval ({steps:,} steps" + (f", ~{minutes(interval)} min)" if interval
                                                      else ")")
    stop = "a preemption" if spot else "a drain"
    if found.save_seconds <= budget.save_deadline_seconds:
        return (f"{stop} loses nothing when its stop-time save is made (~"
                f"{found.save_seconds:,.0f} s of {budget.save_deadline_seconds} s), {lost} when "
                "a save in flight or a slow store prevents it")
    return (f"no save fits the {budget.save_deadline_seconds} s a stop leaves the trainer (~"
            f"{found.save_seconds:,.0f} s a save): {stop} loses {lost}")
