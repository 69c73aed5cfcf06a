"""`torchrec-cloud doctor --stack S`: what `pulumi up` will need, and whether this machine and
the account have it, before anything is paid for.

Checked, each with one line (ok / missing / short / not checked and why): the Pulumi CLI
(>= MIN_PULUMI), Docker buildx (unless job.image names a built image), kubectl, the cloud's CLI
signed in (kubelogin too on Azure), this machine's public address inside
kubernetes.apiAccessCidrs (when the address can be learnt), and the quotas every GPU pool's
maxNodes needs, read from the cloud's own quota API:
- AWS: Service Quotas (boto3 `service-quotas` get_service_quota) for the instance family's
  on-demand and spot vCPU quotas (infra/quotas.py EC2_QUOTAS, also what `pulumi up` reads);
- Azure: `az vm list-skus` names the size's quota family, `az vm list-usage` its limit and use
  (spot: the regional lowPriorityCores);
- GCP: `gcloud compute regions describe` for the region's GPU quota of the model (PREEMPTIBLE_
  for spot) and the machine family's CPUs (`<FAMILY>_CPUS` where the region lists it, else CPUS).
Each shortfall comes with the request command. Nothing is reported as checked unless it was read.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from ipaddress import ip_address, ip_network
from pathlib import Path
from typing import Any, Callable, Sequence

from infra.catalog.cloud import Cloud
from infra.quotas import (Need, Reading, azure_family, azure_readings, ec2_quota,
                          ec2_request_command, gcp_readings, pool_needs)
from infra.settings.model.stack_file import Settings
from torchrec_cloud.invocation import cli, typed

MIN_PULUMI = (3, 174, 0)
IP_SERVICE = "https://checkip.amazonaws.com"

Runner = Callable[[Sequence[str]], "tuple[int, str]"]


def run_command(command: Sequence[str]) -> tuple[int, str]:
    """(exit status, stdout) of a local command; 127 when it is not installed."""
    if shutil.which(command[0]) is None:
        return 127, ""
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return 124, ""
    return done.returncode, done.stdout or done.stderr


def public_address() -> str | None:
    import urllib.request

    try:
        with urllib.request.urlopen(IP_SERVICE, timeout=5) as answer:  # noqa: S310 (fixed https URL)
            return answer.read().decode().strip()
    except OSError:
        return None


@dataclass(frozen=True)
class Finding:
    status: str  # "ok", "missing", "short", "not checked"
    what: str
    detail: str = ""

    def line(self) -> str:
        return f"  {self.status:<12}{self.what}{': ' + self.detail if self.detail else ''}"


# --- tools ----------------------------------------------------------------------------------
def _version(text: str) -> tuple[int, ...] | None:
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", text)
    return tuple(int(x) for x in found.groups()) if found else None


def tools(settings: Settings, run: Runner) -> list[Finding]:
    found = []
    code, out = run(["pulumi", "version"])
    version = _version(out) if code == 0 else None
    need = ".".join(map(str, MIN_PULUMI))
    if version is None:
        found.append(Finding("missing", "Pulumi CLI", f">= {need}: https://www.pulumi.com/docs/iac/download-install/"))
    elif version < MIN_PULUMI:
        found.append(Finding("missing", "Pulumi CLI", f"{'.'.join(map(str, version))} is older than "
                             f"{need}: pulumi self-update (or reinstall)"))
    else:
        found.append(Finding("ok", "Pulumi CLI", ".".join(map(str, version))))
    if settings.job.image:
        found.append(Finding("ok", "Docker buildx", "not needed: job.image names the trainer image"))
    else:
        code, out = run(["docker", "buildx", "version"])
        found.append(Finding("ok", "Docker buildx", out.strip().splitlines()[0] if out.strip() else "")
                     if code == 0 else Finding("missing", "Docker buildx", "`pulumi up` builds the "
                                               "trainer image: https://docs.docker.com/build/"
                                               "install-buildx/ (or set job.image)"))
    code, _ = run(["kubectl", "version", "--client"])
    found.append(Finding("ok", "kubectl") if code == 0 else
                 Finding("missing", "kubectl", "https://kubernetes.io/docs/tasks/tools/"))
    return found


def signed_in(settings: Settings, run: Runner) -> list[Finding]:
    cloud = settings.cloud
    if cloud == Cloud.AWS:
        code, out = run(["aws", "sts", "get-caller-identity", "--output", "json"])
        if code == 127:
            return [Finding("missing", "AWS CLI", "https://aws.amazon.com/cli/")]
        if code != 0:
            return [Finding("missing", "AWS credentials", "aws configure (or aws sso login)")]
        account = json.loads(out or "{}").get("Account", "?")
        return [Finding("ok", "AWS credentials", f"account {account}")]
    if cloud == Cloud.AZURE:
        found = []
        code, out = run(["az", "account", "show", "--output", "json"])
        if code == 127:
            found.append(Finding("missing", "Azure CLI", "https://learn.microsoft.com/cli/azure/install-azure-cli"))
        elif code != 0:
            found.append(Finding("missing", "Azure sign-in", "az login"))
        else:
            found.append(Finding("ok", "Azure sign-in", f"subscription {json.loads(out).get('id', '?')}"))
        code, _ = run(["kubelogin", "--version"])
        found.append(Finding("ok", "kubelogin") if code == 0 else
                     Finding("missing", "kubelogin", "az aks install-cli (AKS with Entra ID needs it "
                                                     "for kubectl)"))
        return found
    code, out = run(["gcloud", "auth", "list", "--filter=status:ACTIVE", "--format=value(account)"])
    if code == 127:
        return [Finding("missing", "gcloud CLI", "https://cloud.google.com/sdk/docs/install")]
    # Only an account line counts: with nobody signed in gcloud prints nothing on stdout and a
    # warning on stderr ("WARNING: The following filter keys were not present ..."), which a
    # reader of either stream would take for an account (new-user review B2).
    accounts = [line.strip() for line in out.splitlines() if "@" in line and " " not in line.strip()]
    if code != 0 or not accounts:
        return [Finding("missing", "gcloud sign-in", "gcloud auth login && gcloud auth "
                                                     "application-default login")]
    found = [Finding("ok", "gcloud sign-in", accounts[0])]
    # What Pulumi's Google provider uses: application-default credentials, not gcloud's own.
    code, _ = run(["gcloud", "auth", "application-default", "print-access-token"])
    found.append(Finding("ok", "gcloud application-default credentials") if code == 0 else
                 Finding("missing", "gcloud application-default credentials",
                         "gcloud auth application-default login (Pulumi signs in with these)"))
    return found


def address(settings: Settings, stack: str, fetch: Callable[[], str | None]) -> Finding:
    mine = fetch()
    if not mine:
        return Finding("not checked", "your address in kubernetes.apiAccessCidrs",
                       f"{IP_SERVICE} did not answer")
    cidrs = settings.kubernetes.api_access_cidrs
    try:
        inside = any(ip_address(mine) in ip_network(c, strict=False) for c in cidrs)
    except ValueError:
        return Finding("not checked", "your address in kubernetes.apiAccessCidrs", f"{mine}?")
    if inside:
        return Finding("ok", "your address in kubernetes.apiAccessCidrs", mine)
    return Finding("missing", "your address in kubernetes.apiAccessCidrs",
                   f"{mine} is outside {', '.join(cidrs)}: pulumi config set --stack {stack} "
                   f"--path 'kubernetes.apiAccessCidrs[{len(cidrs)}]' {mine}/32")


# --- quotas: what each pool needs and the request commands are infra/quotas.py's, the same
# words `pulumi up`'s check before any resource uses --------------------------------------------
def needs(settings: Settings) -> list[Need]:
    """What each GPU pool at its maxNodes needs."""
    return pool_needs(settings)


def _sum_need(items: list[Need], key: Callable[[Need], Any]) -> dict[Any, list[Need]]:
    grouped: dict[Any, list[Need]] = {}
    for need in items:
        grouped.setdefault(key(need), []).append(need)
    return grouped


def _finding(reading: Reading) -> Finding:
    what = f"{reading.quota} for {reading.need.describe()}"
    if reading.short:
        return Finding("short", what, f"{reading.numbers()}; request: {reading.request}")
    return Finding("ok", what, reading.numbers())


def aws_quotas(settings: Settings, client: Any) -> list[Finding]:
    found = []
    region = settings.region
    # By quota, not family: P4 and P5 pools share the on-demand P quota, not the spot one.
    for quota, group in _sum_need(needs(settings), lambda n: ec2_quota(n.machine, n.spot)).items():
        code, spot = quota.code, group[0].spot
        need = sum(n.vcpus for n in group)
        what = f"EC2 {'spot' if spot else 'on-demand'} {quota.label} vCPUs ({code}, {region})"
        try:
            value = client.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"]
        except Exception as error:  # noqa: BLE001 (botocore's ClientError, no credentials, ...)
            found.append(Finding("not checked", what, " ".join(str(error).split())[:200]))
            continue
        pools = " + ".join(f"{n.pool} {n.nodes} x {n.machine.name} ({n.machine.vcpus} vCPUs)" for n in group)
        if value >= need:
            found.append(Finding("ok", what, f"{value:g} >= {need} for {pools}"))
        else:
            found.append(Finding("short", what, f"{value:g} < {need} for {pools}; request: "
                                 f"{ec2_request_command(code, need, region)}"))
    return found


def azure_quotas(settings: Settings, run: Runner) -> list[Finding]:
    region = settings.region
    code, out = run(["az", "vm", "list-usage", "--location", region, "--output", "json"])
    if code != 0:
        return [Finding("not checked", f"Azure compute quotas ({region})", "az vm list-usage failed "
                        "(az login?)")]
    usages = json.loads(out or "[]")
    code, out = run(["az", "account", "show", "--output", "json"])
    subscription = json.loads(out or "{}").get("id", "") if code == 0 else ""
    found = []
    for need in needs(settings):
        family = ""
        if not need.spot:
            code, out = run(["az", "vm", "list-skus", "--location", region, "--size",
                             need.machine.name, "--resource-type", "virtualMachines", "--output", "json"])
            family = azure_family(json.loads(out or "[]") if code == 0 else [], need.machine.name) or ""
            if not family:
                found.append(Finding("not checked", f"{need.machine.name} quota family ({region})",
                                     "az vm list-skus did not list the size"))
                continue
        found.extend(_finding(r) for r in azure_readings(need, family, usages, subscription, region))
    return found


def gcp_quotas(settings: Settings, run: Runner) -> list[Finding]:
    region = settings.region
    project = getattr(getattr(settings, "gcp", None), "project", "") or ""
    command = ["gcloud", "compute", "regions", "describe", region, "--format=json",
               *([f"--project={project}"] if project else [])]
    code, out = run(command)
    if code != 0:
        return [Finding("not checked", f"GCP quotas ({region})", f"{' '.join(command)} failed")]
    quotas = json.loads(out or "{}").get("quotas", [])
    return [_finding(r) for need in needs(settings)
            for r in gcp_readings(need, quotas, region, project)]


def quotas(settings: Settings, run: Runner, aws_client: Callable[[], Any]) -> list[Finding]:
    if settings.cloud == Cloud.AWS:
        try:
            client = aws_client()
        except Exception as error:  # noqa: BLE001 (boto3 missing, no region, ...)
            return [Finding("not checked", "EC2 quotas", f"{type(error).__name__}: {error}")]
        return aws_quotas(settings, client)
    if settings.cloud == Cloud.AZURE:
        return azure_quotas(settings, run)
    return gcp_quotas(settings, run)


def report(settings: Settings, stack: str, run: Runner, fetch: Callable[[], str | None],
           aws_client: Callable[[], Any]) -> tuple[list[str], bool]:
    found = [*tools(settings, run), *signed_in(settings, run), address(settings, stack, fetch),
             *quotas(settings, run, aws_client)]
    lines = [f"doctor --stack {stack} ({settings.cloud.value}, {settings.region}):",
             *(f.line() for f in found)]
    bad = [f for f in found if f.status in ("missing", "short")]
    lines.append(f"{len(bad)} to fix before `pulumi up --stack {stack}`" if bad
                 else f"ready for `pulumi up --stack {stack}`")
    return lines, not bad


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", required=True, help="checks Pulumi.<stack>.yaml of this project")
    parser.add_argument("--stack-file", type=Path, metavar="PATH", help="another stack file")


def _settings(stack: str, path: Path) -> Settings:
    from infra.settings.loader import settings_from_mapping
    from infra.settings.errors import use_stack
    from infra.settings.loader import project_values
    from torchrec_cloud.stack_file import project_name, read_stack_file

    use_stack(stack)
    root = Path(__file__).resolve().parent.parent
    config = read_stack_file(path, project_name(root / "Pulumi.yaml"))
    return settings_from_mapping(project_values(config.config))


def run(args: argparse.Namespace) -> int:
    from infra.settings.errors import SettingsError
    from torchrec_cloud.stack_file import StackFileError, unknown_stack

    unknown = None if args.stack_file else unknown_stack(args.stack, Path(__file__).resolve().parent.parent)
    if unknown:
        print(f"doctor: {unknown}", file=sys.stderr)
        return 2
    path = args.stack_file or Path(__file__).resolve().parent.parent / f"Pulumi.{args.stack}.yaml"
    try:
        settings = _settings(args.stack, path)
    except (SettingsError, StackFileError) as error:
        again = f"--file {typed(path)}" if args.stack_file else f"--stack {args.stack}"
        print(f"doctor: {error}\n(`{cli(f'check {again}')}` first)", file=sys.stderr)
        return 1

    def aws_client() -> Any:
        import boto3

        return boto3.client("service-quotas", region_name=settings.region)

    lines, ready = report(settings, args.stack, run_command, public_address, aws_client)
    print("\n".join(lines))
    return 0 if ready else 1
