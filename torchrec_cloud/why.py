"""`torchrec-cloud why --stack S [--name N]`: why a job of the stack is not running.

The user's entry point to workloads/why.py (which reads the cluster and judges, and keeps its
own `python -m workloads.why --namespace --job --kubeconfig` for a cluster without a stack):
the namespace, the job and the kubeconfig come from the stack's outputs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from torchrec_cloud.stack import StackError, add_stack_arguments, kubeconfig_file, read_outputs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_stack_arguments(parser)
    parser.add_argument("--name", help="a submitted job (default: the stack's own job)")


def run(args: argparse.Namespace) -> int:
    from torchrec_cloud.kube import unreachable
    from workloads.waiting import explain
    from workloads.why import ApiError, Kubectl, read_view, render

    try:
        outputs = read_outputs(args.stack, args.outputs)
    except StackError as error:
        print(f"why: {error}", file=sys.stderr)
        return 2
    with kubeconfig_file(outputs, args.kubeconfig) as kubeconfig:
        try:
            view = read_view(Kubectl(kubeconfig), outputs.job_namespace,
                             args.name or outputs.job_name, outputs.cloud)
        except (ApiError, OSError, subprocess.TimeoutExpired) as error:
            print(f"why: cannot read the cluster: {unreachable(args.stack, str(error)) or error}",
                  file=sys.stderr)
            return 2
    sys.stdout.write(render(view, explain(view)))
    return 0
