"""`torchrec-cloud submit --stack S --name N [--nodes K] [--pool spot|onDemand] [--priority P]
[--dry-run] -- <trainer flags>`: another training job on the stack's cluster, without `pulumi up`.

Judged first, before anything is created, by the rules `pulumi up` applies to the stack's own
job: the stack file with job.name, job.nodes, job.pool and the extra trainer flags (merged into
job.trainerArgs) goes through the same settings validation (infra/settings/), so a stack-owned
flag, a misspelt one or more nodes than the pool's maxNodes are refused with the same words.
Rendered by workloads/submitted.py from the stack's own JobSet (its image, identity, volumes)
and queued through the stack's Kueue LocalQueue, with its own checkpoint folder and telemetry
under the stack's store (`<bucket>/<name>/`). `--dry-run` prints the objects as YAML.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from infra.cadence import checkpoints_in_effect
from infra.catalog.machines import find_machine
from infra.preemption import estimated_save, stop_budget
from infra.settings.errors import SettingsError
from infra.settings.model.stack_file import Settings
from infra.settings.errors import Problem, for_stack, use_stack
from infra.settings.loader import project_values, settings_and_problems
from infra.settings.model.job import Job, JobKind, PoolChoice
from torchrec_cloud.encrypted import encrypted_places, with_stand_ins
from torchrec_cloud.stack import (Outputs, StackError, add_stack_arguments, kubeconfig_file,
                                  read_outputs)
from torchrec_cloud.stack_file import (StackFileError, project_name, read_stack_file,
                                      unknown_stack)
from torchrec_cloud.invocation import cli

ROOT = Path(__file__).resolve().parent.parent
POOLS = {"spot": PoolChoice.SPOT, "onDemand": PoolChoice.ON_DEMAND}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_stack_arguments(parser)
    parser.add_argument("--name", required=True, help="the job's name (RFC 1123, at most 63 "
                        "characters): its objects, its checkpoint folder <bucket>/<name>/")
    parser.add_argument("--nodes", type=int, help="nodes the job spans (default: job.nodes)")
    parser.add_argument("--pool", choices=sorted(POOLS), help="default: job.pool")
    parser.add_argument("--priority", help="a Kueue WorkloadPriorityClass the stack made: "
                        "low, normal or high (admitted first from the queue)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the objects as YAML, create nothing")
    parser.add_argument("--stack-file", type=Path, metavar="PATH",
                        help="the stack file (default: Pulumi.<stack>.yaml of this project)")
    parser.add_argument("--base", type=Path, metavar="JOBSET.json",
                        help="the stack's own JobSet as JSON (`kubectl get jobset -o json`), "
                             "instead of reading it from the cluster")
    parser.add_argument("trainer_flags", nargs=argparse.REMAINDER,
                        help="after --: trainer flags, e.g. -- --learning_rate=0.01")


def parse_trainer_flags(tokens: Sequence[str]) -> dict[str, Any]:
    """`--k=v`, `--k v` or a bare `--k` (true) -> trainerArgs, values typed as YAML reads them."""
    tokens = list(tokens)
    if tokens[:1] == ["--"]:
        tokens = tokens[1:]
    flags: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("--"):
            raise SystemExit(f"submit: {token!r} is not a trainer flag (--name=value)")
        key, eq, value = token[2:].partition("=")
        if not eq:
            if i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
                value, i = tokens[i + 1], i + 1
            else:
                value = "true"
        typed = yaml.safe_load(value) if value else ""
        flags[key] = typed if isinstance(typed, (str, int, float, bool)) else value
        i += 1
    return flags


def submission_settings(stack_file: Path, stack: str, name: str, nodes: int | None,
                        pool: str | None, flags: dict[str, Any]) -> Settings:
    """The stack's settings with this job's name, size, pool and flags, judged by every rule
    (SettingsError lists what is refused)."""
    use_stack(stack)
    config = read_stack_file(stack_file, project_name(ROOT / "Pulumi.yaml"))
    values = with_stand_ins(project_values(config.config), encrypted_places(config.secrets),
                            cloud=stack)
    job = dict(values.get("job") or {})
    own_pool = str(job.get("pool") or PoolChoice.ON_DEMAND.value)
    # The stack's Kueue queue admits to its job's pool, and to on-demand too when a spot job
    # falls back (workloads/kueue.py flavors): another pool would never be admitted.
    admitted = {own_pool}
    if own_pool == PoolChoice.SPOT.value and \
            str((job.get("spotShortage") or {}).get("policy")) == "onDemand":
        admitted.add(PoolChoice.ON_DEMAND.value)
    if pool is not None and pool not in admitted:
        raise SettingsError([Problem(
            "job.pool", pool, f"the stack's queue admits jobs to {' and '.join(sorted(admitted))} "
            f"only (job.pool {own_pool}); submit with --pool {own_pool}, or change job.pool "
            "and `pulumi up` first")])
    job["name"] = name
    if nodes is not None:
        job["nodes"] = nodes
    if pool is not None:
        job["pool"] = pool
    job["trainerArgs"] = {**(job.get("trainerArgs") or {}), **flags}
    job.pop("suspend", None)  # a submitted job is queued, never created suspended
    values["job"] = job
    settings, problems = settings_and_problems(values)
    if problems or settings is None:
        raise SettingsError(problems)
    return settings


# The settings submit's options stand for: a refusal names the option, not the stack file's
# setting, and gives the problem's reason without the `pulumi config` command that would edit
# the stack's own job (Problem.reason); a fix that changes another setting of the stack
# (Problem.elsewhere: a pool's maxNodes) is kept, with the `pulumi up` it needs.
SUBMIT_OPTIONS = {"job.nodes": "--nodes", "job.name": "--name", "job.pool": "--pool"}
# The trainer flags a submitted job gets from its own name: its store <bucket>/<name>/ and
# its run folders (workloads/flags.py stack_flags with the job's name).
NAMED_AFTER_THE_JOB = ("checkpoint_dir", "telemetry_dir", "metrics_file", "tensorboard_dir")


def stack_owned_fix(flag: str, stack: str) -> str:
    """What a submitted job can do about a flag the stack passes it (WORKLOAD_OWNED_FLAGS),
    which `--` cannot set: the option that decides it, the stack file it is read from, or
    the `pulumi up` that changes it for every job."""
    from infra.settings.stack_flags import WORKLOAD_OWNED_FLAGS
    from workloads.flags import PER_JOB_FLAGS

    setting = WORKLOAD_OWNED_FLAGS[flag][1]
    if flag in NAMED_AFTER_THE_JOB or setting == "job.name":
        return ("a submitted job gets its own, named after its --name (under <bucket>/<name>/ "
                "or <mount>/runs/<name>/): submit again without it")
    if setting in SUBMIT_OPTIONS:
        return f"a submitted job's follows {SUBMIT_OPTIONS[setting]}: submit again without it"
    if flag in PER_JOB_FLAGS and setting:
        return (f"a submitted job takes {setting} from the stack file when it is submitted "
                f"(`pulumi config set --stack {stack} --path {setting} <value>` changes it for "
                f"the next submit, and for the stack's own job at `pulumi up --stack {stack}`): "
                "submit again without it")
    if setting:
        return (f"the same for every job of the stack: change {setting} in the stack file and "
                f"run `pulumi up --stack {stack}`; submit again without it")
    return "worked out for each job, a submitted one too: submit again without it"


def as_submit_problems(problems: list[Problem], stack: str,
                       flags: Mapping[str, Any] | None = None) -> str:
    """Each problem as the option or trainer flag the user gave `submit` (`flags`: those after
    --), in words built from the problem's parts; a trainer flag the user did not give is the
    stack file's or the trainer's default, overridden after --; a stack-file setting (one
    submit did not change) keeps its own words."""
    given_flags = flags or {}
    from infra.settings.stack_flags import WORKLOAD_OWNED_FLAGS
    from infra.settings.trainer_flags import format_value

    lines = []
    for problem in problems:
        flag = problem.path.removeprefix("job.trainerArgs.")
        given = format_value(problem.value)  # as the user typed it after --
        if problem.path in SUBMIT_OPTIONS:
            where = f"{SUBMIT_OPTIONS[problem.path]} {problem.value}"
            again = "submit again with another value"
        elif problem.path.startswith("job.trainerArgs.") and flag in WORKLOAD_OWNED_FLAGS:
            decided_by = WORKLOAD_OWNED_FLAGS[flag][0]
            lines.append(f"  -- --{flag}={given}: set by the stack from {decided_by}; "
                         f"{stack_owned_fix(flag, stack)}")
            continue
        elif problem.path.startswith("job.trainerArgs.") and flag in given_flags:
            where = f"-- --{flag}={given}"
            again = "submit again without it (or with another value)"
        elif problem.path.startswith("job.trainerArgs."):
            where = (f"--{flag} (not given)" if problem.value is None else
                     f"--{flag}={given} (the stack file's job.trainerArgs, which a submitted "
                     "job takes)")
            again = f"submit again with another value after --: -- --{flag}=<value>"
        else:
            lines.append(str(problem))
            continue
        # A rule that wrote no reason put no command in its words (or is shown as it is).
        text = f"{problem.reason or problem.allowed}; {again}"
        for fix in problem.elsewhere:
            text += f"; or {fix}, then `pulumi up --stack {stack}`"
        lines.append(f"  {where}: {for_stack(text)}")
    return "\n".join(lines)


def _bucket_root(outputs: Outputs) -> str:
    """<scheme>://<bucket>: the checkpoint URI is <bucket>/<stack's job name>."""
    uri = outputs.checkpoint_uri
    suffix = f"/{outputs.job_name}"
    return uri[: -len(suffix)] if uri.endswith(suffix) else uri


def render(settings: Settings, outputs: Outputs, base: dict[str, Any],
           priority: str | None, kubernetes_version: str | None = None) -> list[dict[str, Any]]:
    from workloads import kueue, submitted

    # The base JobSet's namespace, where the stack's Kueue LocalQueue is: a job.namespace edited
    # in the stack file since the last `pulumi up` must not move a submitted job away from it.
    namespace = (base.get("metadata") or {}).get("namespace") or outputs.job_namespace
    job = settings.job.model_copy(update={"namespace": namespace})
    pool = settings.job_pool
    spot = job.pool == PoolChoice.SPOT
    machine = find_machine(settings.cloud, pool.machine_type)
    assert machine is not None  # the settings' rules refuse an unknown machine
    budget = stop_budget(settings.cloud, spot, job.termination_grace_seconds, kubernetes_version)
    # The settings carry this job's name, nodes and pool: its cadence and save are its own.
    s = submitted.Submission(
        job=job, stack=outputs.stack, queue=outputs.job_name, bucket_root=_bucket_root(outputs),
        budget=budget, machine=machine, checkpoints=checkpoints_in_effect(settings),
        dataset=settings.dataset, save_estimate=estimated_save(settings),
        mount=settings.shared_file_system.mount_path,
        priority=kueue.priority_class_name(priority) if priority else None)
    return submitted.objects(base, s)


def same_submission(args: argparse.Namespace) -> str:
    """The options and trainer flags of this submit as typed again (the offline command)."""
    import shlex

    words = ["--name", args.name]
    for flag, value in (("--nodes", args.nodes), ("--pool", args.pool),
                        ("--priority", args.priority)):
        if value is not None:
            words += [flag, str(value)]
    words.append("--dry-run")
    flags = [w for w in args.trainer_flags if w != "--"]
    return shlex.join(words + (["--", *flags] if flags else []))


def dry_run_needs(stack: str, namespace: str, job_name: str, reason: str,
                  submission: str = "--name <name> --dry-run") -> str:
    """Why `--dry-run` cannot render from the stack file alone, and how to render offline."""
    return (f"submit --dry-run renders the job from two live things the stack file does not "
            f"hold: the stack's outputs (the checkpoint store `pulumi up` named, the job's "
            f"namespace and Kueue queue) and the stack's own JobSet, whose pod template carries "
            f"the trainer image `pulumi up` built (unless job.image), the job identity's service "
            f"account, the shared file system's volume and the fabric devices; a submitted job "
            f"copies them so that it runs as the stack's job does. Here: {reason}. Offline: "
            f"`pulumi stack output --json --show-secrets --stack {stack} > outputs.json` and "
            f"`kubectl get jobset -n {namespace} {job_name} -o json > base.json` where the "
            f"cluster answers, then `{cli(f'submit --stack {stack} --outputs outputs.json --base base.json {submission}')}`")


def _own_job_name(stack_file: Path) -> str:
    """The stack's own job's name, as its stack file sets it (job.name, else the default)."""
    config = read_stack_file(stack_file, project_name(ROOT / "Pulumi.yaml"))
    name = (project_values(config.config).get("job") or {}).get("name")
    return str(name or Job.model_fields["name"].default)


def _read_base(args: argparse.Namespace, outputs: Outputs, read: Any) -> dict[str, Any]:
    if args.base:
        return json.loads(args.base.read_text(encoding="utf-8"))
    from workloads.jobset import API_VERSION

    path = (f"/apis/{API_VERSION}/namespaces/{outputs.job_namespace}/jobsets/{outputs.job_name}")
    return json.loads(read(path))


def run(args: argparse.Namespace) -> int:
    from workloads import kueue
    from workloads.submitted import BaseJobError
    from workloads.why import ApiError, Kubectl, NotFound
    from torchrec_cloud.kube import KubeWriter, unreachable

    if args.priority and args.priority not in kueue.PRIORITY_CLASSES:
        print(f"submit: --priority {args.priority}: the stack makes "
              f"{', '.join(kueue.PRIORITY_CLASSES)} (Kueue WorkloadPriorityClasses "
              f"{', '.join(map(kueue.priority_class_name, kueue.PRIORITY_CLASSES))})", file=sys.stderr)
        return 2
    unknown = None if args.stack_file else unknown_stack(args.stack, ROOT)
    if unknown:
        print(f"submit: {unknown}", file=sys.stderr)
        return 2
    stack_file = args.stack_file or ROOT / f"Pulumi.{args.stack}.yaml"
    flags = parse_trainer_flags(args.trainer_flags)
    try:
        settings = submission_settings(stack_file, args.stack, args.name, args.nodes,
                                       POOLS[args.pool].value if args.pool else None, flags)
    except StackFileError as error:
        print(f"submit: {error}", file=sys.stderr)
        return 1
    except SettingsError as error:
        print(f"submit: refused, nothing was created:\n"
              f"{as_submit_problems(error.problems, args.stack, flags)}",
              file=sys.stderr)
        return 1
    if settings.job.kind != JobKind.JOB_SET:
        print("submit: refused: the stack's job.kind is pytorchjob; submit queues JobSets "
              "(job.kind: jobset)", file=sys.stderr)
        return 1
    try:
        outputs = read_outputs(args.stack, args.outputs)
    except StackError as error:
        print(f"submit: {error}" if not args.dry_run else
              dry_run_needs(args.stack, settings.job.namespace, _own_job_name(stack_file),
                            f"the outputs could not be read ({error})", same_submission(args)),
              file=sys.stderr)
        return 2
    if args.name == outputs.job_name:
        print(f"submit: --name {args.name} is the stack's own job; choose another name",
              file=sys.stderr)
        return 1
    with kubeconfig_file(outputs, args.kubeconfig) as kubeconfig:
        try:
            base = _read_base(args, outputs, Kubectl(kubeconfig))
            objects = render(settings, outputs, base, args.priority,
                             outputs.kubernetes_version or None)
            namespace = objects[-1]["metadata"]["namespace"]
        except NotFound:
            print(f"submit: the stack's job {outputs.job_namespace}/{outputs.job_name} is not on "
                  f"the cluster (its JobSet is the base of a submitted job): `pulumi up --stack "
                  f"{args.stack}` creates it", file=sys.stderr)
            return 1
        except (ApiError, OSError) as error:
            reason = unreachable(args.stack, str(error)) or str(error)
            print(dry_run_needs(args.stack, outputs.job_namespace, outputs.job_name,
                                f"the JobSet could not be read: {reason}",
                                same_submission(args))
                  if args.dry_run and not args.base else f"submit: {reason}", file=sys.stderr)
            return 1
        except BaseJobError as error:
            print(f"submit: {error}", file=sys.stderr)
            return 1
        if args.dry_run:
            sys.stdout.write(yaml.safe_dump_all(objects, sort_keys=False))
            return 0
        writer = KubeWriter(kubeconfig)
        try:
            for obj in objects:
                writer.create(obj)
        except (ApiError, NotFound, OSError) as error:
            print(f"submit: {unreachable(args.stack, str(error)) or error}", file=sys.stderr)
            return 1
    job = settings.job
    print(f"submitted {namespace}/{job.name}: {job.nodes} nodes on pool {job.pool.value}"
          f"{f', priority {args.priority}' if args.priority else ''}, queued through "
          f"{outputs.job_name}'s Kueue queue; store {_bucket_root(outputs)}/{job.name}/\n"
          f"  {cli(f'list --stack {args.stack}')}   {cli(f'cancel --stack {args.stack} --name {job.name}')}")
    return 0
