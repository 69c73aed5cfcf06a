"""`torchrec-cloud cancel --stack S --name N`: stop a submitted job.

Deletes its JobSet (in the background: the child Jobs and pods follow) and its headless service
and network policy. Each pod gets its termination grace period: the kubelet's SIGTERM reaches the
launcher, which forwards it, and the trainer saves a final checkpoint within its save deadline
(trainer/launch.py, the spot-notice path), so `submit` with the same name later resumes from it.
The stack's own job is not cancelled here: `pulumi up` would make it again; `job.suspend: true`
stops it the stack's way.
"""

from __future__ import annotations

import argparse
import json
import sys

from torchrec_cloud.jobs import JOBSET_API, SUBMITTED
from torchrec_cloud.stack import StackError, add_stack_arguments, kubeconfig_file, read_outputs
from torchrec_cloud.invocation import cli


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_stack_arguments(parser)
    parser.add_argument("--name", required=True, help="the submitted job (`list` names them)")


def run(args: argparse.Namespace) -> int:
    from torchrec_cloud.kube import KubeWriter, unreachable
    from workloads.why import ApiError, Kubectl, NotFound

    try:
        outputs = read_outputs(args.stack, args.outputs)
    except StackError as error:
        print(f"cancel: {error}", file=sys.stderr)
        return 2
    ns = outputs.job_namespace
    if args.name == outputs.job_name:
        print(f"cancel: {args.name} is the stack's own job, which `pulumi up` would make again; "
              f"stop it with: `pulumi config set --stack {args.stack} --path job.suspend true && "
              f"pulumi up --stack {args.stack}`", file=sys.stderr)
        return 1
    jobset_path = f"/apis/{JOBSET_API}/namespaces/{ns}/jobsets/{args.name}"
    with kubeconfig_file(outputs, args.kubeconfig) as kubeconfig:
        try:
            jobset = json.loads(Kubectl(kubeconfig)(jobset_path))
            labels = (jobset.get("metadata") or {}).get("labels") or {}
            if labels.get(SUBMITTED) != "true":
                print(f"cancel: {ns}/{args.name} was not made by submit; "
                      "left alone", file=sys.stderr)
                return 1
            writer = KubeWriter(kubeconfig)
            writer.delete(jobset_path)
            for path in (f"/api/v1/namespaces/{ns}/services/{args.name}",
                         f"/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies/"
                         f"{args.name}-same-job-only"):
                try:
                    writer.delete(path)
                except NotFound:
                    pass
        except NotFound:
            print(f"cancel: no job {ns}/{args.name} on the cluster (`{cli(f'list --stack {args.stack}')}` "
                  "shows the jobs)", file=sys.stderr)
            return 1
        except (ApiError, OSError) as error:
            print(f"cancel: {unreachable(args.stack, str(error)) or error}", file=sys.stderr)
            return 1
    print(f"cancelled {ns}/{args.name}: its pods get their grace period to save a final "
          f"checkpoint; its store and spend record stay (`{cli(f'cost --stack {args.stack}')}`)")
    return 0
