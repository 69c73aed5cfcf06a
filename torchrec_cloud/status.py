"""`python -m torchrec_cloud status --stack aws`: where a deployed stack's training stands.

Sections: pools and nodes, the gang, training progress and the newest checkpoint, restarts,
spend so far (an estimate). Everything is read with the user's own credentials: the stack's
outputs (torchrec_cloud/stack.py), the cluster through `kubectl get --raw` with the stack's
kubeconfig (workloads/why.py says why kubectl), the bucket through fsspec. A section that
cannot be read prints one line saying what and why; the others still print. Also writes the
curves and summary (trainer/report.py, when present) to out/status/<stack>/.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

from torchrec_cloud import pools as pool_view
from torchrec_cloud import progress as progress_view
from torchrec_cloud import restarts as restart_view
from torchrec_cloud.cluster_age import cluster_created
from torchrec_cloud.gpu_metrics import read_gpu_utilisation
from torchrec_cloud.kube import CLUSTER_UNREAD
from torchrec_cloud.logs import container_of, rank0
from torchrec_cloud.stack import (Outputs, StackError, add_stack_arguments, PROJECT_ROOT, file_name,
                                  kubeconfig_file, open_bucket, read_outputs)
from torchrec_cloud.invocation import pins, pip_install
from workloads.names import JobNames
from workloads.waiting import ClusterView, Kind, explain
from workloads.waiting.kueue import QUOTA_RESERVED, workload_admission
from workloads.why import ApiError, Kubectl, NotFound, Reader, read_view

OUT_DIR = Path("out/status")
LOG_TAIL_LINES = 500  # rank 0's recent lines hold several metric records (log_every steps each)
BucketOpener = Callable[[str], tuple[Any, str]]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_stack_arguments(parser)
    parser.add_argument("--out", default=str(OUT_DIR), help="where the PNG and summary.json go "
                        "(a folder per stack under it)")
    # The clock, for reproducible output (the tests); default: now.
    parser.add_argument("--now", help=argparse.SUPPRESS)


# ---- reading ----------------------------------------------------------------------------------

@dataclass
class Telemetry:
    """What the bucket (or, failing that, rank 0's log) says about training."""

    records: list[dict[str, Any]] = field(default_factory=list)
    source: str = ""  # where the records came from
    written: datetime | None = None  # when metrics.jsonl was last written
    problem: str = ""  # why the bucket could not be read
    checkpoint: progress_view.Checkpoint | None = None
    checkpoint_problem: str = ""


def read_telemetry(outputs: Outputs, opener: BucketOpener) -> Telemetry:
    found = Telemetry()
    if not outputs.checkpoint_uri:
        found.problem = found.checkpoint_problem = "the stack has no checkpoint_uri output"
        return found
    metrics_uri = f"{outputs.telemetry_uri}/metrics.jsonl"
    try:
        fs, path = opener(metrics_uri)
        with fs.open(path, "rb") as f:
            found.records = progress_view.read_records(f.read().decode("utf-8", "replace"))
        found.source, found.written = metrics_uri, progress_view.modified(fs, path)
    except FileNotFoundError:
        found.problem = f"{metrics_uri} does not exist yet (the trainer writes it at its first log step)"
    except Exception as error:  # noqa: BLE001 (any SDK's error: credentials, network, permissions)
        found.problem = f"cannot read {metrics_uri}: {_one_line(error)}"
    if outputs.checkpoints_on_shared_file_system:
        return found  # the bucket holds no checkpoint: progress_section says where they are
    try:
        fs, root = opener(outputs.checkpoint_uri)
        found.checkpoint = progress_view.newest_checkpoint(fs, root)
    except Exception as error:  # noqa: BLE001
        found.checkpoint_problem = f"cannot list {outputs.checkpoint_uri}: {_one_line(error)}"
    return found


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) < 300 else text[:297] + "..."


def trainer_pods(view: ClusterView) -> list[dict[str, Any]]:
    selector = JobNames(view.job, view.namespace, "").selector
    return [p for p in view.pods
            if all(((p.get("metadata") or {}).get("labels") or {}).get(k) == v
                   for k, v in selector.items())]


def rank0_log(read: Reader, view: ClusterView) -> tuple[str, str]:
    """(log, pod name) of rank 0's pod: completion index 0 (JobSet) or replica index 0
    (PyTorchJob), a running one first; core/v1 PodLogOptions container and tailLines."""
    pod = rank0(trainer_pods(view))
    if pod is None:
        raise NotFound("no rank 0 pod")
    if (pod.get("status") or {}).get("phase") == "Pending":
        raise NotFound(f"Pod/{pod['metadata']['name']} (rank 0) has not started")
    container = container_of(pod)
    name = pod["metadata"]["name"]
    path = (f"/api/v1/namespaces/{view.namespace}/pods/{name}/log"
            f"?container={quote(container)}&tailLines={LOG_TAIL_LINES}")
    return read(path), name


# ---- the sections -----------------------------------------------------------------------------

def ago(then: datetime | None, now: datetime) -> str:
    if then is None:
        return ""
    return f"{progress_view.duration((now - then).total_seconds())} ago"


def pools_section(view: ClusterView, configured: dict[str, str] | None = None) -> list[str]:
    found, unnamed = pool_view.pools(view, configured)
    if not found:
        return ["no nodes and no autoscaler node groups visible"]
    lines = []
    for pool in found:
        lines.append(pool.line())
        if pool.failure:
            lines.append(f"  scale-up failed: {pool.failure}")
    lines += [f"scale-up failed: {line}" for line in unnamed]
    return lines


def gang_section(view: ClusterView) -> list[str]:
    if view.jobset is None:
        return [f"no job {view.job} in namespace {view.namespace}"]
    lines = [_admission(view)]
    pods = trainer_pods(view)
    phases: dict[str, int] = {}
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase") or "Unknown"
        phases[phase] = phases.get(phase, 0) + 1
    counts = ", ".join(f"{phases.get(p, 0)} {p.lower()}" for p in ("Running", "Pending", "Failed", "Succeeded")
                       if phases.get(p) or p != "Succeeded")
    lines.append(f"pods: {counts}")
    verdict = explain(view)
    lines.append(f"state: {verdict.reason}")
    if verdict.kind not in (Kind.RUNNING, Kind.COMPLETED):
        lines.append(f"  evidence: {verdict.evidence}")
        lines.append(f"  next step: {verdict.next_step}")
    return lines


def _admission(view: ClusterView) -> str:
    """Kueue's word on the job's Workload, as the waiting module reads it (workload_admission):
    admitted with its ClusterQueue and flavor, or the condition that holds it."""
    found = workload_admission(view)
    if found is None:
        return "no Kueue Workload for the job (no queue, or Kueue not installed)"
    if found.admitted:
        where = ", ".join(x for x in (
            f"ClusterQueue {found.cluster_queue}" if found.cluster_queue else "",
            f"flavor {', '.join(found.flavors)}" if found.flavors else "") if x)
        return f"admitted by Kueue{f' ({where})' if where else ''}"
    why = found.waiting_on
    return (f"not admitted by Kueue: Workload/{found.name} "
            f"{why.get('type', QUOTA_RESERVED)}={why.get('status', 'False')}"
            f" ({why.get('reason', '')}): {why.get('message', 'not yet considered')}")


def progress_section(view: ClusterView | None, telemetry: Telemetry, read: Reader | None,
                     now: datetime, outputs: Outputs | None = None) -> list[str]:
    lines = []
    records = telemetry.records
    if not records and read is not None and view is not None and view.jobset is not None:
        try:
            log, pod = rank0_log(read, view)
            records = progress_view.records_from_log(log)
            if records:
                telemetry.records, telemetry.source = records, f"rank 0's log (Pod/{pod})"
        except (NotFound, ApiError, OSError, subprocess.TimeoutExpired) as error:
            lines.append(f"rank 0's log cannot be read either: {_one_line(error)}")
    if telemetry.problem:
        lines.insert(0, f"metrics: {telemetry.problem}")
    total = progress_view.total_steps(records, view.jobset if view else None)
    found = progress_view.progress(records, total, *(
        () if view is not None and view.jobset is not None else ("the job could not be read",)))
    if found is None:
        lines.append("no training record yet")
    else:
        written = f", written {ago(telemetry.written, now)}" if telemetry.written else ""
        lines.append(found.line())
        lines.append(f"  from {telemetry.source}{written}")
    if outputs is not None and outputs.checkpoints_on_shared_file_system:
        lines += _shared_file_system_checkpoints(outputs, records, telemetry.source)
    elif telemetry.checkpoint_problem:
        lines.append(f"checkpoint: {telemetry.checkpoint_problem}")
    elif telemetry.checkpoint is None:
        lines.append("newest complete checkpoint: none yet (no step-N folder with .metadata)")
    else:
        c = telemetry.checkpoint
        when = f", {c.time:%Y-%m-%d %H:%M} UTC ({ago(c.time, now)})" if c.time else ""
        lines.append(f"newest complete checkpoint: step {c.step:,}{when}")
    return lines


def _shared_file_system_checkpoints(outputs: Outputs, records: list[dict[str, Any]],
                                    source: str) -> list[str]:
    """Checkpoints on the cluster's file system: not listable from here, so the newest save
    the trainer reported (its `checkpoint` records, or its log's save lines)."""
    where = f" ({outputs.checkpoint_dir})" if outputs.checkpoint_dir else ""
    lines = [f"checkpoints: on the shared file system{where}, not readable from here"]
    step = progress_view.newest_save(records)
    if step is None:
        lines.append("newest checkpoint save: none reported yet")
    else:
        lines.append(f"newest checkpoint save started: step {step:,} (from {source}; it "
                     "completes in the background)")
    return lines


def spend_section(view: ClusterView, outputs: Outputs, read: Reader, now: datetime) -> list[str]:
    created = cluster_created(read) if outputs.estimated_cost else None
    s = pool_view.spend(view.nodes, outputs.cloud, now, outputs.estimated_cost, created)
    if s.fixed_items:
        fixed = (f"; plus {', '.join(s.fixed_items)} at USD {s.fixed_usd_per_hour:,.2f}/h for the "
                 f"cluster's {progress_view.duration(pool_view.hours_between(created, now) * 3600)}"
                 f" (USD {s.fixed_usd:,.2f})")
    elif not outputs.estimated_cost:
        fixed = "; file system, network and control plane not in it (the stack has no estimated_cost output)"
    else:
        fixed = "; file system, network and control plane not in it (the cluster's age cannot be read)"
    lines = [f"about USD {s.usd:,.2f} so far, USD {s.usd_per_hour:,.2f}/h now ({s.counted} nodes "
             "alive now, each from its creation at the catalog's list price, spot or on-demand"
             f"{fixed}; an estimate: nodes already removed, disks and per-GB traffic are not in it)"]
    if s.unpriced:
        lines.append(f"not priced (not in infra/catalog/machines.py): {', '.join(s.unpriced)}")
    return lines


def standing_section(outputs: Outputs, read: Reader, opener: BucketOpener,
                     now: datetime) -> list[str]:
    """What the stack costs with no job, and how long it has been idle: no job queued, admitted
    or running on the cluster, since the newest end of any job's spend record (or since the
    cluster was created when no job ever ran)."""
    from torchrec_cloud.cost import monthly_line, standing_items
    from torchrec_cloud.jobs import rows

    lines = [line for line in [monthly_line(outputs.estimated_cost, outputs.stack)] if line]
    found, problems = rows(outputs, read, opener)
    if problems:
        return lines + problems
    active = [r.name for r in found if r.state in ("queued", "admitted", "running")]
    if active:
        return lines + [f"not idle: {', '.join(active)} queued or running"]
    ends = [pool_view.parse_time(str(r.spend.get("updated"))) for r in found if r.spend]
    since = max((e for e in ends if e is not None), default=None) or cluster_created(read)
    if since is None:
        return lines
    hours = pool_view.hours_between(since, now)
    rate = sum(price for _, price in standing_items(outputs.estimated_cost))
    lines.append(f"idle for {progress_view.duration(hours * 3600)} (no job queued or running "
                 f"since {since:%Y-%m-%d %H:%M} UTC): about USD {hours * rate:,.2f} of fixed items "
                 f"for nothing; stop paying: pulumi destroy --stack {outputs.stack} (the "
                 "checkpoint bucket is kept unless checkpoints.retainOnDestroy is false)")
    return lines


def standing_without_cluster(outputs: Outputs, root: Path = PROJECT_ROOT) -> list[str]:
    """The monthly cost of what stays while the stack exists, when the cluster does not answer:
    from the stack's estimated_cost output, else (a stack from before that output) from its
    stack file (infra/estimate.py standing_line); with the `pulumi destroy` command either way."""
    from torchrec_cloud.cost import monthly_line

    line = monthly_line(outputs.estimated_cost, outputs.stack)
    if line is None:
        line = _standing_from_stack_file(outputs.stack, root)
    if line is None:
        return [f"not priced: no estimated_cost output and no readable Pulumi.{outputs.stack}.yaml; "
                f"`pulumi destroy --stack {outputs.stack}` stops what the stack costs"]
    return [line, "idle time not known: the cluster did not answer"]


def _standing_from_stack_file(stack: str, root: Path) -> str | None:
    from infra.estimate import standing_line
    from infra.settings.errors import SettingsError
    from infra.settings.loader import project_values, settings_from_mapping
    from torchrec_cloud.stack_file import StackFileError, project_name, read_stack_file

    try:
        config = read_stack_file(root / f"Pulumi.{stack}.yaml", project_name(root / "Pulumi.yaml"))
        return standing_line(settings_from_mapping(project_values(config.config)), stack)
    except (StackFileError, SettingsError, OSError, ValueError):
        return None


def gpu_section(read: Reader, cloud: str) -> list[str]:
    """Each GPU node's mean utilisation from its DCGM exporter (torchrec_cloud/gpu_metrics.py),
    or why it cannot be read from here."""
    found = read_gpu_utilisation(read, cloud)
    if found.per_node is None:
        return [found.reason]
    lines = [f"{node}: {value:.0f}%" for node, value in sorted(found.per_node.items())]
    if found.reason:
        lines.append(found.reason)
    return lines or ["no GPU node reports yet"]


def _write_report(records: list[dict[str, Any]], out_dir: Path) -> str:
    """The curves and summary (trainer/report.py write_report), when that module exists."""
    if not records:
        return "no metrics records: no report written"
    try:
        from trainer.report import write_report  # type: ignore[import-not-found]
    except ImportError:
        return "report skipped: trainer/report.py is not in this checkout"
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        png, summary = write_report(records, str(out_dir))
    except ModuleNotFoundError as error:  # make status installs requirements-cli.txt: no plots
        return (f"report skipped: {error.name} is not installed here (make status installs "
                f"requirements-cli.txt only; `{pip_install(pins('matplotlib', file='requirements-dev.txt'))}` "
                "adds it)")
    except Exception as error:  # noqa: BLE001 (a plot must not hide the status)
        return f"report not written: {_one_line(error)}"
    return f"wrote {png} and {summary}"


def report(outputs: Outputs, read: Reader, now: datetime,
           opener: BucketOpener | None = None, out_dir: Path | None = None) -> str:
    """The whole status as text."""
    return report_and_reach(outputs, read, now, opener, out_dir)[0]


def report_and_reach(outputs: Outputs, read: Reader, now: datetime,
                     opener: BucketOpener | None = None, out_dir: Path | None = None
                     ) -> tuple[str, bool]:
    """The whole status as text, and whether the cluster could be read."""
    opener = opener or (lambda uri: open_bucket(uri, outputs))
    sections: list[tuple[str, list[str]]] = []
    view: ClusterView | None = None
    try:
        view = read_view(read, outputs.job_namespace, outputs.job_name, outputs.cloud)
    except FileNotFoundError:
        problem = ["cannot read the cluster: kubectl is not installed (https://kubernetes.io/docs/tasks/tools/)"]
        sections += [("Pools and nodes", problem), ("Gang", [NOT_READ])]
    except (ApiError, OSError, subprocess.TimeoutExpired) as error:
        from torchrec_cloud.kube import unreachable

        problem = [f"cannot read the cluster: {unreachable(outputs.stack, str(error)) or _one_line(error)}"]
        sections += [("Pools and nodes", problem), ("Gang", [NOT_READ])]
    if view is not None:
        sections.append(("Pools and nodes", pools_section(view, dict(outputs.node_pools))))
        sections.append(("GPU utilisation (DCGM)", gpu_section(read, outputs.cloud)))
        sections.append(("Gang", gang_section(view)))
    telemetry = read_telemetry(outputs, opener)
    sections.append(("Training", progress_section(view, telemetry, read if view else None, now,
                                                  outputs)))
    if view is not None:
        sections.append(("Restarts", restart_view.summary(view)))
        sections.append(("Spend (estimate)", spend_section(view, outputs, read, now)))
        sections.append(("While the stack exists", standing_section(outputs, read, opener, now)))
    else:  # what stays is priced from the stack, not the cluster: a forgotten stack still bills
        sections.append(("While the stack exists", standing_without_cluster(outputs)))
    if out_dir is not None:
        sections.append(("Report", [_write_report(telemetry.records, out_dir)]))
    head = (f"stack {outputs.stack} ({outputs.cloud}, cluster {outputs.cluster_name or '?'}): "
            f"job {outputs.job_namespace}/{outputs.job_name}, {now:%Y-%m-%d %H:%M} UTC")
    body = "\n".join(f"\n{title}\n" + "\n".join(f"  {line}" for line in lines)
                     for title, lines in sections)
    return head + "\n" + body + "\n", view is not None


NOT_READ = "not read: the cluster cannot be read (why and the fix: under Pools and nodes)"


def report_dir(out: str, stack: str) -> Path:
    """Where the report's PNG and summary go: one folder per stack inside `out`, whatever the
    stack's name (`org/proj/aws`, `../../x`: never a path that climbs or nests)."""
    return Path(out) / file_name(stack)


def run(args: argparse.Namespace) -> int:
    try:
        outputs = read_outputs(args.stack, args.outputs)
    except StackError as error:
        print(f"status: {error}", file=sys.stderr)
        return 2
    now = (datetime.fromisoformat(args.now.replace("Z", "+00:00")) if args.now
           else pool_view.now_utc())
    with kubeconfig_file(outputs, args.kubeconfig) as kubeconfig:
        text, reached = report_and_reach(outputs, Kubectl(kubeconfig), now,
                                         out_dir=report_dir(args.out, args.stack))
    sys.stdout.write(text)
    return 0 if reached else CLUSTER_UNREAD
