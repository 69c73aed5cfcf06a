"""`torchrec-cloud cost --stack S`: what the stack has cost, per job and per day.

Jobs: each job's own record in the store (spend.json, trainer/spend.py: node-hours from the
trainer's start to its last copy at the catalog's price of its pool), so a job whose nodes are
gone, or a stack destroyed since, still shows. Fixed items: the stack's `estimated_cost`
output's items that are not GPU nodes (system nodes, file system, network, control plane,
storage: infra/estimate.py), every hour since the cluster was created (the `default`
namespace's age; `--since` when the cluster is gone). List prices: an estimate, not the bill.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from typing import Any, Mapping

from torchrec_cloud.jobs import BucketOpener, bucket_root, spends
from torchrec_cloud.pools import parse_time
from torchrec_cloud.stack import (Outputs, StackError, add_stack_arguments, kubeconfig_file,
                                  open_bucket, read_outputs)

HOURS_PER_MONTH = 730  # 365 * 24 / 12
GPU_ITEM = "GPU nodes"  # infra/estimate.py hourly(): the only item that scales with the job


def standing_items(estimated_cost: Mapping[str, Any]) -> list[tuple[str, float]]:
    """(item, USD/h) of what stays while the stack exists, whether or not a job runs."""
    return [(str(e.get("item")), float(e["usd_per_hour"]))
            for e in estimated_cost.get("items") or []
            if isinstance(e, Mapping) and e.get("item") != GPU_ITEM
            and isinstance(e.get("usd_per_hour"), (int, float))]


def monthly_line(estimated_cost: Mapping[str, Any], stack: str) -> str | None:
    items = standing_items(estimated_cost)
    if not items:
        return None
    rate = sum(p for _, p in items)
    return (f"while the stack exists, even idle: about USD {rate * HOURS_PER_MONTH:,.0f} a month "
            f"(USD {rate:,.2f}/h: {', '.join(name for name, _ in items)}) until "
            f"`pulumi destroy --stack {stack}` (checkpoints are kept)")


def _day_split(start: datetime, end: datetime) -> list[tuple[str, float]]:
    """(day, hours) of [start, end) cut at UTC midnights."""
    out = []
    while start < end:
        midnight = datetime(start.year, start.month, start.day, tzinfo=timezone.utc) + timedelta(days=1)
        stop = min(end, midnight)
        out.append((start.strftime("%Y-%m-%d"), (stop - start).total_seconds() / 3600))
        start = stop
    return out


def by_day(records: Mapping[str, Mapping[str, Any]], fixed_rate: float,
           created: datetime | None, now: datetime) -> dict[str, dict[str, float]]:
    days: dict[str, dict[str, float]] = defaultdict(lambda: {"fixed": 0.0, "jobs": 0.0})
    if created is not None:
        for day, hours in _day_split(created, now):
            days[day]["fixed"] += hours * fixed_rate
    for record in records.values():
        for seg in record.get("segments") or []:
            start, end = parse_time(seg.get("start")), parse_time(seg.get("end"))
            if start is None or end is None:
                continue
            rate = float(seg.get("nodes", 0)) * float(seg.get("usd_per_node_hour", 0))
            for day, hours in _day_split(start, end):
                days[day]["jobs"] += hours * rate
    return dict(sorted(days.items()))


def report(outputs: Outputs, records: Mapping[str, Mapping[str, Any]],
           created: datetime | None, now: datetime, unread: str = "") -> list[str]:
    """`unread`: why the cluster's creation time could not be read, when it could not."""
    items = standing_items(outputs.estimated_cost)
    rate = sum(p for _, p in items)
    lines = [f"stack {outputs.stack}: cost at list prices, {now:%Y-%m-%d %H:%M} UTC", "", "Jobs"]
    total_jobs = 0.0
    for name, record in sorted(records.items()):
        usd = float(record.get("usd") or 0)
        total_jobs += usd
        lines.append(f"  {name:24} {float(record.get('gpu_hours') or 0):>9,.1f} GPU-h "
                     f"{float(record.get('node_hours') or 0):>8,.1f} node-h  USD {usd:>10,.2f}")
    if not records:
        lines.append("  no job has a spend record in the store yet")
    lines += ["", "By day (UTC)      fixed items        jobs       total"]
    total_fixed = 0.0
    for day, figures in by_day(records, rate, created, now).items():
        total_fixed += figures["fixed"]
        lines.append(f"  {day}   {figures['fixed']:>12,.2f} {figures['jobs']:>11,.2f} "
                     f"{figures['fixed'] + figures['jobs']:>11,.2f}")
    if created is None:
        lines.append("  fixed items not counted: the cluster's creation time cannot be read"
                     + (f": {unread}" if unread else "") + "; pass --since YYYY-MM-DD, the day "
                     "the stack was created")
    lines += ["", f"total: USD {total_fixed + total_jobs:,.2f} (fixed items USD {total_fixed:,.2f},"
                  f" jobs USD {total_jobs:,.2f})"]
    monthly = monthly_line(outputs.estimated_cost, outputs.stack)
    if monthly:
        lines.append(monthly)
    return lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_stack_arguments(parser)
    parser.add_argument("--since", help="when the stack was created (YYYY-MM-DD or RFC 3339), "
                        "when the cluster cannot be asked")
    parser.add_argument("--now", help=argparse.SUPPRESS)  # tests pin the clock


def _time(text: str) -> datetime | None:
    value = parse_time(text if "T" in text else f"{text}T00:00:00Z")
    return value if value is None or value.tzinfo else value.replace(tzinfo=timezone.utc)


def run(args: argparse.Namespace, opener: BucketOpener | None = None) -> int:
    from torchrec_cloud.pools import now_utc
    from torchrec_cloud.cluster_age import cluster_created_or_why
    from torchrec_cloud.kube import CLUSTER_UNREAD, unreachable
    from workloads.why import Kubectl

    try:
        outputs = read_outputs(args.stack, args.outputs)
    except StackError as error:
        print(f"cost: {error}", file=sys.stderr)
        return 2
    now = _time(args.now) if args.now else now_utc()
    assert now is not None
    opener = opener or (lambda uri: open_bucket(uri, outputs))
    records: dict[str, dict[str, Any]] = {}
    root = bucket_root(outputs)
    try:
        records = spends(opener, root) if root else {}
    except Exception as error:  # noqa: BLE001 (any SDK's error)
        print(f"cost: cannot read {root}: {' '.join(str(error).split())[:200]}", file=sys.stderr)
    created = _time(args.since) if args.since else None
    unread = ""
    if created is None:
        with kubeconfig_file(outputs, args.kubeconfig) as kubeconfig:
            created, unread = cluster_created_or_why(Kubectl(kubeconfig))
        # The same explanation status, list and logs give an unreachable API server.
        unread = unreachable(outputs.stack, unread) or unread[:300]
    print("\n".join(report(outputs, records, created, now, unread)))
    # As status and list: what could be read is printed, and a script sees the gap (with
    # --since the cluster is not needed).
    return CLUSTER_UNREAD if unread else 0
