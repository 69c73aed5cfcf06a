"""`python -m torchrec_cloud logs --stack aws [--all] [--follow]`: the training job's log.

Rank 0 by default (the one that prints the metrics lines), every trainer pod with --all
(each line prefixed with its pod). kubectl with the stack's kubeconfig, so the cloud's exec
plugin authenticates as the user (workloads/why.py). The pods are found by the labels every
pod of the job carries (workloads/names.py JobNames.selector); rank 0 is completion index 0 of
the JobSet's Indexed Job, or replica index 0 of a PyTorchJob.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
from typing import Any
from urllib.parse import quote

from torchrec_cloud.kube import unreachable
from torchrec_cloud.stack import StackError, add_stack_arguments, kubeconfig_file, read_outputs
from torchrec_cloud.invocation import cli
from workloads.names import COMPLETION_INDEX_LABEL, PYTORCHJOB_CONTAINER, TRAINER_CONTAINER, JobNames
from workloads.why import ApiError, Kubectl, NotFound
from torchrec_cloud.child_wait import wait_for_exit

PYTORCHJOB_RANK_LABEL = "training.kubeflow.org/replica-index"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_stack_arguments(parser)
    parser.add_argument("--all", action="store_true", help="every trainer pod, not only rank 0")
    parser.add_argument("--follow", "-f", action="store_true", help="keep printing new lines")
    parser.add_argument("--tail", type=int, default=200,
                        help="lines from the end of each log to start with (-1: all); default 200")
    parser.add_argument("--previous", action="store_true",
                        help="the previous container's log (after a container restart)")
    parser.add_argument("--name", help="a job `submit` queued (default: the stack's own job)")


def rank0(pods: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Rank 0's pod, a running one first (an old generation's pod may still be terminating)."""
    zero = [p for p in pods if (labels := (p.get("metadata") or {}).get("labels") or {})
            and labels.get(COMPLETION_INDEX_LABEL, labels.get(PYTORCHJOB_RANK_LABEL)) == "0"]
    zero.sort(key=lambda p: (p.get("status") or {}).get("phase") != "Running")
    return zero[0] if zero else None


def container_of(pod: dict[str, Any]) -> str:
    names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
    return next((n for n in names if n in (TRAINER_CONTAINER, PYTORCHJOB_CONTAINER)),
                names[0] if names else TRAINER_CONTAINER)


def logs_command(kubeconfig: str, names: JobNames, pods: list[dict[str, Any]], *,
                 all_pods: bool, follow: bool, tail: int, previous: bool) -> list[str]:
    """The kubectl logs command line for rank 0 or for every trainer pod."""
    base = ["kubectl", "--kubeconfig", kubeconfig, "-n", names.namespace, "logs",
            f"--tail={tail}", *(["-f"] if follow else []), *(["--previous"] if previous else [])]
    if all_pods:
        selector = ",".join(f"{k}={v}" for k, v in sorted(names.selector.items()))
        container = container_of(pods[0]) if pods else TRAINER_CONTAINER
        return [*base, "-l", selector, "-c", container, "--prefix",
                f"--max-log-requests={max(len(pods), 5)}"]
    pod = rank0(pods)
    if pod is None:
        raise LookupError("no rank 0 pod")
    return [*base, pod["metadata"]["name"], "-c", container_of(pod)]


def run(args: argparse.Namespace) -> int:
    try:
        outputs = read_outputs(args.stack, args.outputs)
    except StackError as error:
        print(f"logs: {error}", file=sys.stderr)
        return 2
    names = JobNames(getattr(args, "name", None) or outputs.job_name, outputs.job_namespace, "")
    selector = ",".join(f"{k}={v}" for k, v in sorted(names.selector.items()))
    with kubeconfig_file(outputs, args.kubeconfig) as kubeconfig:
        try:
            listed = Kubectl(kubeconfig)(f"/api/v1/namespaces/{names.namespace}/pods"
                                         f"?labelSelector={quote(selector)}")
        except (ApiError, NotFound, OSError, subprocess.TimeoutExpired) as error:
            print(f"logs: cannot list the job's pods: {unreachable(outputs.stack, str(error)) or error}",
                  file=sys.stderr)
            return 2
        pods = json.loads(listed or "{}").get("items") or []
        if not pods:
            print(f"logs: job {names.namespace}/{names.job} has no pods now; why: "
                  f"`{cli(f'why --stack {outputs.stack}')}`", file=sys.stderr)
            return 1
        try:
            command = logs_command(kubeconfig, names, pods, all_pods=args.all, follow=args.follow,
                                   tail=args.tail, previous=args.previous)
        except LookupError:
            print(f"logs: no rank 0 pod among {len(pods)} pods; try --all", file=sys.stderr)
            return 1
        try:
            return run_kubectl(command)
        except KeyboardInterrupt:  # --follow ends with Ctrl-C
            return 0


def run_kubectl(command: list[str]) -> int:
    """kubectl in a process group of its own, ended with everything it started (an exec
    credential plugin) however this command ends (Ctrl-C, SIGTERM, SIGHUP): Popen.kill() ends the
    direct child only, and a survivor keeps the terminal's pipes and the kubeconfig's reader."""
    # A signal during the spawn would leave a kubectl no `finally` knows: held until it is bound.
    held = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
    signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        process = subprocess.Popen(command, start_new_session=True)
    except BaseException:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)
        raise
    try:
        # A signal that came during the spawn is handled here, inside the cleanup's reach.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)
        return wait_for_exit(process)
    finally:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
