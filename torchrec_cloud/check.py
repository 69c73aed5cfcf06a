"""`python -m torchrec_cloud check --stack aws`: every rule `pulumi up` applies to the stack
file, before paying, with no Pulumi CLI, backend, credentials or network.

The stack file is read as the CLI would hand it to the program (torchrec_cloud/stack_file.py)
and validated by `settings_from_mapping`, the path `pulumi up` takes through `load_settings`:
one set of rules (infra/settings/), two callers. Rules that must ask the cloud (the versions it
offers, the machine's zones and quota for the account) run only in `pulumi up`, and the output
says which. Exits 1 with the same message `pulumi up` would print, 0 with a summary; a problem
judged only on a stand-in for an encrypted value is printed as a possible false alarm and does
not fail the check alone (torchrec_cloud/encrypted.py).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from infra.catalog.cloud import Cloud
from infra.catalog.machines import Machine, find_machine
from infra.estimate import estimate_lines, standing_line
from infra.settings.errors import SettingsError
from infra.settings.model.stack_file import Settings
from infra.settings.errors import use_stack
from infra.settings.loader import project_values, settings_and_problems
from infra.settings.model.checkpoints import CheckpointLocation
from infra.settings.model.job import PoolChoice
from infra.settings.model.pools import NodePool
from torchrec_cloud.encrypted import (Place, doubtful, encrypted_places, marked, on_encrypted,
                                     shown_place, unjudged, with_stand_ins)
from torchrec_cloud.stack_file import StackFileError, project_name, read_stack_file
from torchrec_cloud.invocation import as_run_here, cli

ROOT = Path(__file__).resolve().parent.parent
STACK_FILE = re.compile(r"^Pulumi\.(.+)\.ya?ml$")  # the CLI's name for a stack's file
STACKS = tuple(cloud.value for cloud in Cloud)
# What only the cloud can answer, checked by `pulumi up` before it creates anything.
NEEDS_CREDENTIALS = {
    Cloud.AWS: "the Kubernetes minors EKS offers in the region (infra/aws/versions.py), zone "
               "names and ids and the GPU zone's offering of the machine (infra/aws/zones.py), "
               "the capacity reservation (infra/aws/reservations.py), the job's vCPU quota "
               "(infra/aws/quotas.py)",
    Cloud.AZURE: "the Kubernetes minors AKS offers in the region (infra/azure/versions.py), the "
                 "VM sizes your subscription may use per zone (infra/azure/skus.py), "
                 "subscription features (infra/azure/features.py), NetApp Files capacity "
                 "(infra/azure/netapp.py), the job's vCPU quota (infra/azure/quotas.py)",
    Cloud.GCP: "the Kubernetes minors GKE's REGULAR channel offers (infra/gcp/versions.py), the "
               "project itself and the checkpoint bucket (infra/gcp/component.py), the job's "
               "GPU and CPU quotas in the region (infra/gcp/quotas.py)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--stack", help="checks Pulumi.<stack>.yaml of this project: aws, azure, "
                       "gcp or any stack with a file here (aws-prod: Pulumi.aws-prod.yaml, its "
                       "cloud read from the file)")
    where.add_argument("--file", type=Path, metavar="PATH",
                       help="a stack file elsewhere (its keys namespaced as in this project)")


def _machine(cloud: Cloud, pool: NodePool) -> str:
    found: Machine | None = find_machine(cloud, pool.machine_type)
    if found is None:
        return pool.machine_type
    if not found.has_gpus:
        return f"{found.name} ({found.vcpus} vCPU, {found.memory_gib:g} GiB)"
    fabric = "" if found.interconnect.value == "none" else f", {found.interconnect.value}"
    return f"{found.name} ({found.gpu_count} x {found.gpu_model} {found.gpu_memory_gib} GB{fabric})"


def _sizes(pool: NodePool) -> str:
    return f"nodes min {pool.min_nodes} / desired {pool.desired_nodes} / max {pool.max_nodes}"


def _checkpoints(settings: Settings) -> str:
    c = settings.checkpoints
    if not c.enabled:
        return "off"
    where = {Cloud.AWS: "S3 bucket", Cloud.AZURE: "Blob container",
             Cloud.GCP: "Cloud Storage bucket"}[settings.cloud]
    location = (f"the stack's {where}" if c.location == CheckpointLocation.OBJECT_STORE
                else f"{settings.shared_file_system.mount_path}/checkpoints/{settings.job.name}")
    kept = "kept" if c.retain_on_destroy else "deleted"
    return (f"{location}, {_cadence(settings)}, newest {c.keep} kept ({kept} on destroy)"
            + "".join(f"\n             {line}" for line in _loss(settings)))


def _cadence(settings: Settings) -> str:
    """Every N steps (~minutes at the planned rate; derived or set), and on spot every S s."""
    from infra.cadence import cadence, minutes

    found = cadence(settings)
    spot = settings.job.pool == PoolChoice.SPOT
    rate = found.steps_per_second
    when = f" (~{minutes(found.every_steps / rate)} min)" if rate else ""
    how = (f"derived: one save ~{found.save_seconds:,.0f} s, written at most 10% of the time"
           if found.steps_derived else "set")
    text = f"every {found.every_steps:,} steps{when}, {how}"
    if spot and found.every_seconds:
        text += f"; on spot also every {found.every_seconds:,} s"
    return text


def _loss(settings: Settings) -> list[str]:
    from infra.cadence import preemption_loss

    loss = preemption_loss(settings)
    return [loss] if loss else []


def report_lines(settings: Settings) -> list[str]:
    """The settings that decide what is created and what runs, one per line (the cost and time
    estimate follows them: infra/estimate.py)."""
    s, job = settings, settings.job
    version = s.kubernetes.version or "unset (the cloud's default on the first `pulumi up`)"
    lines = [
        f"cloud        {s.cloud.value}, region {s.region}, zones {', '.join(s.zones)} "
        f"(GPU: {', '.join(s.gpu_zones)})",
        f"kubernetes   version {version}; API reachable from {', '.join(s.kubernetes.api_access_cidrs)}",
        f"system pool  {s.system_pool.name}: {_machine(s.cloud, s.system_pool)}, {_sizes(s.system_pool)}",
    ]
    for key, pool in s.gpu_pools_by_key.items():
        capacity = "spot" if key == PoolChoice.SPOT else "on-demand"
        lines.append(f"GPU pool     {pool.name} ({capacity}): {_machine(s.cloud, pool)}, "
                     f"{_sizes(pool)}")
    if not s.gpu_pools.spot.enabled:
        lines.append("GPU pool     spot: disabled")
    ranks = job.nodes * job.processes_per_node
    state = ", created suspended" if job.suspend else ""
    lines += [
        f"job          {job.kind.value} {job.namespace}/{job.name}: {job.nodes} nodes x "
        f"{job.processes_per_node} processes = {ranks} ranks on {s.job_pool.name} "
        f"({job.pool.value}){state}",
        "trainer      " + " ".join(f"--{k}={_flag(v)}" for k, v in sorted(job.trainer_args.items())),
        f"data         {'synthetic' if not s.dataset.path else s.dataset.path}"
        + (" (prepared by dataset.prepare first)" if s.dataset.prepare.enabled else ""),
        f"checkpoints  {_checkpoints(s)}",
        f"file system  {s.shared_file_system.kind} at {s.shared_file_system.mount_path}",
    ]
    return lines


def _flag(value: object) -> str:
    from infra.settings.trainer_flags import format_value

    return format_value(value)  # type: ignore[arg-type]


def _stack_path(args: argparse.Namespace) -> Path:
    return args.file if args.file is not None else ROOT / f"Pulumi.{args.stack}.yaml"


def stack_name(args: argparse.Namespace) -> str | None:
    """The stack the file belongs to: --stack, or the `<stack>` of a `Pulumi.<stack>.yaml`
    given with --file (None for another name: its commands then name no stack)."""
    if args.stack:
        return args.stack
    found = STACK_FILE.match(args.file.name)
    return found.group(1) if found else None


def _unread_lines(places: list[Place], environments: list[str]) -> list[str]:
    """What the check could not read: encrypted values (their places only) and ESC imports."""
    lines = [f"  {shown_place(place)}: encrypted: not checked (only the stack's secrets "
             "provider can decrypt it; `pulumi up` checks it)" for place in places]
    lines += [f"values from ESC environment {name} are not read: a 'required' for one of its "
              "keys may be a false alarm" for name in environments]
    return lines


def run(args: argparse.Namespace) -> int:
    if args.stack is not None:
        from torchrec_cloud.stack_file import unknown_stack

        unknown = unknown_stack(args.stack, ROOT)
        if unknown:
            print(f"check: {unknown}", file=sys.stderr)
            return 2
    path = _stack_path(args)
    use_stack(stack_name(args))  # every fix command printed names this stack
    try:
        stack = read_stack_file(path, project_name(ROOT / "Pulumi.yaml"))
    except StackFileError as error:
        print(error, file=sys.stderr)
        return 1
    places = encrypted_places(stack.secrets)
    # The file's torchrec-cloud:cloud decides; the stack's name stands in only for an encrypted
    # one, and only where it names a cloud (aws-prod does not).
    values = with_stand_ins(project_values(stack.config), places,
                            cloud=args.stack if args.stack in STACKS else None)
    settings, problems = settings_and_problems(values)
    skipped = unjudged(settings, places)
    problems = [p for p in problems if not on_encrypted(p, places, values) and p not in skipped]
    alarms = [marked(p, places) for p in problems if doubtful(p, places)]
    problems = [p for p in problems if not doubtful(p, places)]
    if problems or settings is None:
        problems += alarms
        if problems:
            print(as_run_here(f"{path.name}: {SettingsError(problems)}"), file=sys.stderr)
        else:
            print(f"{path.name}: nothing can be checked without torchrec-cloud:cloud, which is "
                  "encrypted (check with --stack aws|azure|gcp to name it)", file=sys.stderr)
        for line in _unread_lines(places, stack.environments):
            print(line, file=sys.stderr)
        # The last line, just above make's "*** [Makefile:NN: check] Error 1": a refusal, not a
        # crash (the exit status stays 1 so that CI stops on a bad stack file).
        count = len(problems)
        print(f"check: {count or 'no'} problem{'s' if count != 1 else ''} in {path.name}; "
              "nothing was created (exit status 1)", file=sys.stderr)
        return 1
    if alarms:  # judged on a stand-in only: `pulumi up` judges the real value
        print(f"{path.name}: no setting is certainly bad; judged on stand-ins for encrypted "
              "values, these may be false alarms (`pulumi up` checks them):", file=sys.stderr)
        for problem in alarms:
            print(as_run_here(str(problem)), file=sys.stderr)
    else:
        print(f"{path.name}: every setting is valid (read without the Pulumi CLI, a backend "
              "or credentials)")
    from infra.settings.security_rules import unpinned_image_notice

    if notice := unpinned_image_notice(settings):
        print(f"warning: {notice}", file=sys.stderr)
    for line in report_lines(settings):
        print(f"  {line}")
    for line in estimate_lines(settings):
        print(line)
    print(standing_line(settings, stack_name(args)))  # a forgotten stack bills
    if places:
        print("above, a default or a stand-in shows in place of each encrypted value:")
    for line in _unread_lines(places, stack.environments):
        print(line)
    print(f"not checked without credentials: {NEEDS_CREDENTIALS[settings.cloud]} "
          "(`pulumi up` checks them before it creates anything)")
    stack = stack_name(args) or "<stack>"
    upfront = ("`pulumi up` reads the quota the job's nodes count against before any resource "
               "(quota.pending: true lets it go ahead); ")
    print(f"quotas: not checked here; {upfront}`{cli(f'doctor --stack {stack}')}` reads every "
          "GPU pool's from the cloud's quota API against its maxNodes")
    return 0
