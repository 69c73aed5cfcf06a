"""`torchrec-cloud list --stack S`: every training job of the stack, its own and the submitted.

For each: where it stands (queued, admitted, running, finished, failed; `ended` for a job whose
objects are gone but whose record is in the store), the newest step and eval AUC (its
metrics.jsonl in the store), GPU-hours and cost (its spend.json, written by the trainer's rank
0: trainer/spend.py). Read with the user's kubectl (the stack's kubeconfig) and the user's own
credentials for the bucket; a part that cannot be read is said so in one line.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import quote

from infra.telemetry import TELEMETRY_FOLDER
from torchrec_cloud.stack import (Outputs, StackError, add_stack_arguments, kubeconfig_file,
                                  open_bucket, read_outputs)
from torchrec_cloud.invocation import cli
from workloads.waiting.kueue import is_admitted  # the one reader of Kueue's conditions

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
KUEUE_API = "kueue.x-k8s.io/v1beta2"
PART_OF = "app.kubernetes.io/part-of=torchrec-cloud"
SUBMITTED = "torchrec-cloud/submitted"
BucketOpener = Callable[[str], tuple[Any, str]]
UNKNOWN = "unknown"  # a state or maker that could not be read
CLUSTER_PROBLEM = "cannot read the cluster: "


@dataclass
class JobRow:
    name: str
    state: str
    submitted: bool | None = False  # None: not known (the cluster could not be read)
    nodes: int | None = None
    step: int | None = None
    eval_auc: float | None = None
    gpu_hours: float | None = None
    usd: float | None = None
    spend: dict[str, Any] | None = None


def bucket_root(outputs: Outputs) -> str:
    suffix = f"/{outputs.job_name}"
    uri = outputs.checkpoint_uri
    return uri[: -len(suffix)] if uri.endswith(suffix) else uri


def jobsets_path(namespace: str) -> str:
    return (f"/apis/{JOBSET_API}/namespaces/{namespace}/jobsets?labelSelector="
            f"{quote(PART_OF, safe='')}")


def _condition(obj: dict[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def state_of(jobset: dict[str, Any], workload: dict[str, Any] | None) -> str:
    """finished / failed from the JobSet; admitted from Kueue's Workload; running once a child
    Job has active pods; queued otherwise (Kueue keeps it suspended until admission)."""
    if _condition(jobset, "Completed"):
        return "finished"
    if _condition(jobset, "Failed"):
        return "failed"
    active = sum(int(r.get("active") or 0) + int(r.get("ready") or 0)
                 for r in (jobset.get("status") or {}).get("replicatedJobsStatus") or [])
    admitted = is_admitted(workload) if workload is not None \
        else not (jobset.get("spec") or {}).get("suspend")
    if admitted:
        return "running" if active else "admitted"
    return "queued"


def _workloads_by_owner(read: Callable[[str], str], namespace: str) -> dict[str, dict[str, Any]]:
    from workloads.why import ApiError, NotFound

    try:
        items = json.loads(read(f"/apis/{KUEUE_API}/namespaces/{namespace}/workloads")).get("items", [])
    except (ApiError, NotFound, ValueError):
        return {}
    found = {}
    for item in items:
        for owner in (item.get("metadata") or {}).get("ownerReferences") or []:
            if owner.get("kind") == "JobSet":
                found[owner.get("name")] = item
    return found


def _nodes(jobset: dict[str, Any]) -> int | None:
    for replicated in (jobset.get("spec") or {}).get("replicatedJobs") or []:
        return replicated.get("template", {}).get("spec", {}).get("parallelism")
    return None


def cluster_rows(read: Callable[[str], str], namespace: str) -> list[JobRow]:
    items = json.loads(read(jobsets_path(namespace))).get("items", [])
    workloads = _workloads_by_owner(read, namespace)
    rows = []
    for item in items:
        meta = item.get("metadata") or {}
        name = meta.get("name", "?")
        rows.append(JobRow(name=name, state=state_of(item, workloads.get(name)),
                           submitted=(meta.get("labels") or {}).get(SUBMITTED) == "true",
                           nodes=_nodes(item)))
    return rows


def _read_json(fs: Any, path: str) -> dict[str, Any] | None:
    try:
        with fs.open(path, "rb") as f:
            return json.loads(f.read())
    except (FileNotFoundError, ValueError):
        return None


def spends(opener: BucketOpener, root: str) -> dict[str, dict[str, Any]]:
    """Every job's spend.json in the store: `<root>/<job>/telemetry/spend.json`."""
    fs, path = opener(root)
    found = {}
    try:
        folders = fs.ls(path, detail=False)
    except FileNotFoundError:
        return {}
    for folder in folders:
        record = _read_json(fs, f"{folder.rstrip('/')}/{TELEMETRY_FOLDER}/spend.json")
        if record is not None:
            found[str(record.get("job") or folder.rstrip("/").rsplit("/", 1)[-1])] = record
    return found


def progress(opener: BucketOpener, root: str, job: str) -> tuple[int | None, float | None]:
    """(newest step, newest eval AUC) from the job's metrics.jsonl in the store."""
    from torchrec_cloud.progress import read_records

    fs, path = opener(f"{root}/{job}/{TELEMETRY_FOLDER}/metrics.jsonl")
    try:
        with fs.open(path, "rb") as f:
            records = read_records(f.read().decode("utf-8", "replace"))
    except FileNotFoundError:
        return None, None
    steps = [r["step"] for r in records if isinstance(r.get("step"), int)]
    aucs = [r["auc"] for r in records if r.get("event") == "eval"
            and isinstance(r.get("auc"), (int, float))]
    return (max(steps) if steps else None), (aucs[-1] if aucs else None)


def rows(outputs: Outputs, read: Callable[[str], str] | None, opener: BucketOpener
         ) -> tuple[list[JobRow], list[str]]:
    """Every job, cluster first then the store's; the problems met, one line each."""
    from workloads.why import ApiError, NotFound

    problems: list[str] = []
    found: list[JobRow] = []
    cluster_read = False
    if read is not None:
        try:
            found = cluster_rows(read, outputs.job_namespace)
            cluster_read = True
        except (ApiError, NotFound, OSError, ValueError) as error:
            from torchrec_cloud.kube import unreachable

            problems.append(f"{CLUSTER_PROBLEM}{unreachable(outputs.stack, str(error)) or error}")
    root = bucket_root(outputs)
    records: dict[str, dict[str, Any]] = {}
    if root:
        try:
            records = spends(opener, root)
        except Exception as error:  # noqa: BLE001 (any SDK's error)
            problems.append(f"cannot read {root}: {' '.join(str(error).split())[:200]}")
    names = {r.name for r in found}
    # A job with a record but no objects on a cluster that answered has ended; with the
    # cluster unread, where it stands is unknown. Who made it only its labels said: the stack's
    # own job is known by its name (submit refuses that name), another is not known.
    found += [JobRow(name=name, state="ended" if cluster_read else UNKNOWN, nodes=None,
                     submitted=False if name == outputs.job_name else None)
              for name in sorted(records) if name not in names]
    for row in found:
        record = records.get(row.name)
        if record is not None:
            row.spend, row.usd = record, record.get("usd")
            row.gpu_hours = record.get("gpu_hours")
        if root:
            try:
                row.step, row.eval_auc = progress(opener, root, row.name)
            except Exception:  # noqa: BLE001
                pass
    return found, problems


def _cell(value: Any, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def table(found: list[JobRow]) -> list[str]:
    lines = [f"{'JOB':24} {'STATE':9} {'BY':6} {'NODES':>5} {'STEP':>8} {'EVAL AUC':>8} "
             f"{'GPU-H':>8} {'USD':>9}"]
    for r in found:
        by = "?" if r.submitted is None else "submit" if r.submitted else "stack"
        lines.append(f"{r.name:24} {r.state:9} {by:6} "
                     f"{_cell(r.nodes, 'd'):>5} {_cell(r.step, 'd'):>8} "
                     f"{_cell(r.eval_auc, '.4f'):>8} {_cell(r.gpu_hours, ',.1f'):>8} "
                     f"{_cell(r.usd, ',.2f'):>9}")
    return lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_stack_arguments(parser)


def run(args: argparse.Namespace, opener: BucketOpener | None = None) -> int:
    from workloads.why import Kubectl

    try:
        outputs = read_outputs(args.stack, args.outputs)
    except StackError as error:
        print(f"list: {error}", file=sys.stderr)
        return 2
    opener = opener or (lambda uri: open_bucket(uri, outputs))
    with kubeconfig_file(outputs, args.kubeconfig) as kubeconfig:
        found, problems = rows(outputs, Kubectl(kubeconfig), opener)
    unread = any(p.startswith(CLUSTER_PROBLEM) for p in problems)
    for line in table(found):
        print(line)
    for problem in problems:
        print(problem)
    print("GPU-hours and USD: each job's own record (the trainer's rank 0, from its start to its "
          "last copy, at the catalog's list price of its pool); "
          f"`{cli(f'cost --stack {args.stack}')}` adds the stack's fixed items by day"
          + ("; BY ?: made by the stack or by submit, unknown without the cluster" if
             any(r.submitted is None for r in found) else ""))
    from torchrec_cloud.kube import CLUSTER_UNREAD

    return CLUSTER_UNREAD if unread else 0

