"""The one decision: gather the facts from a ClusterView once, then try the answers of the
evidence modules (pods.py, kueue.py, autoscaler.py) in a fixed precedence and return the first
that applies: a finished job, then what only the user can fix (image, admission, quota, capacity,
pool size), then what fixes itself (a node being added, the dataset being prepared); the order is
the only thing this module knows, so a new waiting reason is an answer in its evidence module and
one place in RULES."""

from __future__ import annotations

from typing import Callable

from workloads.names import JobNames
from workloads.waiting.autoscaler import cloud_refusal, no_scale_up, scaling_up
from workloads.waiting.kueue import admission
from workloads.waiting.pods import (all_running, cloud_of, finished, image_pull, node_left_out,
                                    on_spot, preparing, starting, suspended, unschedulable,
                                    unscheduled)
from workloads.waiting.verdict import Verdict
from workloads.waiting.view import ClusterView, Event, Facts, name_of, selected


def facts(view: ClusterView) -> Facts:
    names = JobNames(job=view.job, namespace=view.namespace, service_account="")
    trainers = selected(view.pods, names.selector)
    preparers = selected(view.pods, names.prepare_selector)
    pending = [p for p in [*trainers, *preparers] if unscheduled(p)]
    pending_names = {name_of(p) for p in pending}
    events = sorted((Event.of(e) for e in view.events), key=lambda e: e.time)
    ours = [e for e in events if e.kind == "Pod" and e.name in pending_names]
    return Facts(view, names, trainers, preparers, pending, ours, events,
                 spot=any(on_spot(p) for p in trainers), cloud=cloud_of(view))


RULES: tuple[Callable[[Facts], Verdict | None], ...] = (
    # The gate's taint before the autoscaler's "max node group size reached": a tainted node
    # still counts toward the pool's size, so the pool looks full while it waits for a
    # healthy node in its place. A preparation before "running": the trainer pods run, waiting
    # for its layout in their main container.
    finished, preparing, all_running, image_pull, admission, suspended, cloud_refusal,
    node_left_out, no_scale_up, scaling_up, unschedulable,
)


def explain(view: ClusterView) -> Verdict:
    """The first answer that applies, in the order of RULES."""
    f = facts(view)
    for rule in RULES:
        verdict = rule(f)
        if verdict is not None:
            return verdict
    return starting(f)
