"""kubectl commands a user copies from the stack outputs to follow the job."""

from __future__ import annotations

from infra.settings.model.job import JobKind
from workloads.names import COMPLETION_INDEX_LABEL, JobNames


def on_prepare_pods(names: JobNames, verb: str) -> str:
    """`kubectl <verb>` on the preparation Job's pods: its name is Pulumi's, its labels ours."""
    selector = ",".join(f"{k}={v}" for k, v in sorted(names.prepare_selector.items()))
    return f"kubectl -n {names.namespace} {verb} -l {selector}"


def prepare_logs_command(names: JobNames) -> str:
    """The preparation Job's log from the start; its retried pods count against kubectl's
    default of 5 followed pods."""
    return f"{on_prepare_pods(names, 'logs -f')} --tail=-1 --max-log-requests=20"


def why_command(names: JobNames, cloud: str | None = None, stack: str | None = None) -> str:
    """The one command that says why the job is not running, run from the repository with the
    stack's virtual environment, as `pulumi up` runs the program: the user's command line
    (`torchrec-cloud why --stack S`: the namespace, job and kubeconfig from the stack's
    outputs) when the stack is known, else workloads/why.py's own entry point."""
    if stack:
        return f".venv/bin/python -m torchrec_cloud why --stack {stack}"
    where = f" --cloud {cloud}" if cloud else ""
    return f".venv/bin/python -m workloads.why --namespace {names.namespace} --job {names.job}{where}"


def watch_commands(names: JobNames, kind: JobKind, preparing: bool = False,
                   cloud: str | None = None, stack: str | None = None) -> list[str]:
    """With dataset.prepare, the preparation's log comes first: training waits for it. The why
    command comes last: what to run when the pods do not start."""
    first = [prepare_logs_command(names)] if preparing else []
    return first + _job_commands(names, kind) + [why_command(names, cloud, stack)]


def _job_commands(names: JobNames, kind: JobKind) -> list[str]:
    ns = f"kubectl -n {names.namespace}"
    if kind == JobKind.PYTORCH_JOB:
        pods = f"training.kubeflow.org/job-name={names.job}"
        rank0 = f"{pods},training.kubeflow.org/replica-type=worker,training.kubeflow.org/replica-index=0"
        return [
            f"{ns} get pytorchjob {names.job} -w",
            f"{ns} get pods -l {pods} -w",
            f"{ns} logs -f -l {rank0}",
        ]
    pods = f"jobset.sigs.k8s.io/jobset-name={names.job}"
    return [
        f"{ns} get jobset {names.job} -w",
        f"{ns} get pods -l {pods} -w",
        f"{ns} logs -f -l {pods},{COMPLETION_INDEX_LABEL}=0",
    ]
