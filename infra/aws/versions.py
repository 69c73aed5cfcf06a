"""The EKS versions: what EKS creates today in the stack's region, and what the live cluster runs.

Both are asked of EKS when the program runs, before any cloud resource is registered
(infra/kubernetes_release.py decides between them):
- `offered_versions`: DescribeClusterVersions (`aws.eks.get_cluster_versions`), which names each
  minor's support status, its support dates and the default EKS picks
  (https://docs.aws.amazon.com/eks/latest/APIReference/API_DescribeClusterVersions.html). EKS
  supports a minor for 14 months of standard support, then 12 months of extended support,
  billed per cluster hour (https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html).
  A new cluster gets a minor in standard support, or one in extended support when
  `kubernetes.extendedSupport` accepts the bill.
- `live_version`: DescribeCluster (`aws.eks.get_cluster`) of the cluster the stack made, which
  is also right after EKS upgraded a cluster itself at the end of its support.

Both go through an explicit provider built from the stack's `region` setting (`lookup_provider`),
never the default provider: the stack files set no `aws:region`, and pulumi-aws refuses to
configure a provider without a region (its preConfigureCallback, pulumi/pulumi-aws#2088), even
for an invoke that names its own `region`.

The support dates come with the listing, so no table here ages; they only feed advice
(pulumi.log.warn), never a refusal.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timezone

import pulumi
import pulumi_aws as aws

from infra.kubernetes_release import Offered, Release, minor_key, minor_of
from infra.naming import name_prefix
from infra.previous_run import PreviousRun
from infra.settings.errors import Problem, SettingsError
from infra.settings.model.stack_file import Settings

STANDARD = "STANDARD_SUPPORT"
EXTENDED = "EXTENDED_SUPPORT"
# Warn this many days before a minor leaves standard support: time for one upgrade.
ADVICE_DAYS = 90


@dataclass(frozen=True)
class EksVersion:
    """One row of DescribeClusterVersions."""

    minor: str
    status: str  # STANDARD_SUPPORT, EXTENDED_SUPPORT or UNSUPPORTED
    default: bool
    standard_until: date | None
    extended_until: date | None


def _day(text: str | None) -> date | None:
    """"2026-12-02T00:00:00Z" (the provider's RFC 3339 timestamp) -> 2026-12-02."""
    try:
        return date.fromisoformat(text[:10]) if text else None
    except ValueError:
        return None


# This program run's lookup provider: (root stack resource, region, provider).
_LOOKUPS: tuple[object, str, aws.Provider] | None = None


def lookup_provider(settings: Settings) -> aws.Provider:
    """The AWS provider for the invokes made before the cluster's component exists, in the
    stack's region. One per program run (both version questions share it); it creates nothing
    in AWS, so a run refused after it leaves nothing behind but the provider's own record."""
    global _LOOKUPS
    root = pulumi.runtime.get_root_resource()
    if _LOOKUPS is None or _LOOKUPS[0] is not root or _LOOKUPS[1] != settings.region:
        provider = aws.Provider(f"{name_prefix()}-aws-lookups", region=settings.region)
        _LOOKUPS = (root, settings.region, provider)
    return _LOOKUPS[2]


def lookup(settings: Settings) -> pulumi.InvokeOptions:
    return pulumi.InvokeOptions(provider=lookup_provider(settings))


def list_versions(opts: pulumi.InvokeOptions) -> list[EksVersion]:
    """What EKS answers in the provider's region today (supported minors only: includeAll
    left false)."""
    result = aws.eks.get_cluster_versions(cluster_type="eks", opts=opts)
    return [EksVersion(minor=minor_of(row.cluster_version), status=row.version_status,
                       default=bool(row.default_version),
                       standard_until=_day(row.end_of_standard_support_date),
                       extended_until=_day(row.end_of_extended_support_date))
            for row in result.cluster_versions or []]


def how_to_list(region: str) -> str:
    return (f"aws eks describe-cluster-versions --region {region} --query "
            "'clusterVersions[].[clusterVersion,versionStatus,endOfStandardSupportDate]'")


def offered_versions(settings: Settings) -> Offered:
    """The minors a new cluster (or the next upgrade) may take in the stack's region: those in
    standard support, and those in extended support when kubernetes.extendedSupport is true.
    A pinned minor that EKS keeps in extended support only is refused here unless that
    setting accepts it, naming the setting."""
    region = settings.region
    versions = list_versions(lookup(settings))
    accepts_extended = settings.kubernetes.extended_support
    offered = [v for v in versions
               if v.status == STANDARD or (accepts_extended and v.status == EXTENDED)]
    pinned = settings.kubernetes.version
    if pinned is not None and not accepts_extended:
        extended = next((v for v in versions if v.status == EXTENDED
                         and minor_key(v.minor) == minor_key(pinned)), None)
        if extended is not None:
            standard = ", ".join(sorted((v.minor for v in offered), key=minor_key)) or "none"
            raise SettingsError([Problem(
                "kubernetes.version", pinned,
                f"{pinned} is in EKS extended support only in {region} (billed per cluster "
                f"hour{_until(extended.extended_until)}): set kubernetes.extendedSupport: true "
                f"to accept it, or a minor in standard support: {standard}. Nothing was created")])
    default = next((v.minor for v in versions if v.default), None)
    if default is None:  # EKS always flags one; if not, its newest standard minor
        standard_minors = sorted((v.minor for v in versions if v.status == STANDARD), key=minor_key)
        default = standard_minors[-1] if standard_minors else ""
    chosen = pinned or default
    for row in offered:
        if chosen and minor_key(row.minor) == minor_key(chosen):
            for line in advice(row, today()):
                pulumi.log.warn(line)
    return Offered(minors=tuple(v.minor for v in offered), default=default,
                   where=f"EKS in {region}", how_to_list=how_to_list(region))


def today() -> date:
    return datetime.now(timezone.utc).date()


def _until(day: date | None) -> str:
    return f", until {day.isoformat()}" if day else ""


def advice(version: EksVersion, day: date) -> list[str]:
    """What a user should know about the minor this run creates or upgrades to: a bill for
    extended support, or standard support ending soon (after which EKS either bills extended
    support or upgrades the cluster itself, as kubernetes.extendedSupport says)."""
    if version.status == EXTENDED:
        return [f"Kubernetes {version.minor} is in EKS extended support, billed per cluster hour"
                f"{_until(version.extended_until)}; upgrade one minor at a time with "
                "kubernetes.version to return to standard support"]
    end = version.standard_until
    if end is not None and (end - day).days <= ADVICE_DAYS:
        return [f"Kubernetes {version.minor} leaves EKS standard support on {end.isoformat()} "
                f"(in {(end - day).days} days); then EKS bills extended support "
                "(kubernetes.extendedSupport: true) or upgrades the cluster itself. Plan the "
                "upgrade: set kubernetes.version to the next minor"]
    return []


def live_version(settings: Settings, previous: PreviousRun) -> str | None:
    """The version the stack's cluster runs now, as EKS reports it; the version the last run
    exported when EKS cannot be asked (the cluster is then still the one that run left)."""
    recorded = previous.text("kubernetes_version")
    name = previous.text("cluster_name")
    if name is None:
        return recorded
    try:
        return aws.eks.get_cluster(name=name, opts=lookup(settings)).version or recorded
    except Exception as error:  # noqa: BLE001 (any provider error: fall back to the record)
        pulumi.log.warn(f"could not read EKS cluster {name} ({error}); keeping the version "
                        f"the last run recorded ({recorded})")
        return recorded


SUPPORT_SETTING = "kubernetes.extendedSupport"


def check_support_change(settings: Settings, previous: PreviousRun, release: Release) -> None:
    """Refuse, before any cloud resource, to turn extended support off on a kept cluster whose
    minor EKS already keeps in extended support only: EKS rejects that update ("You can only
    disable extended support for clusters on standard support",
    https://docs.aws.amazon.com/eks/latest/userguide/disable-extended-support.html), which
    would stop `pulumi up` half way. Asked of EKS only when the setting is off on a kept
    cluster whose upgrade policy says EXTENDED."""
    name = previous.text("cluster_name")
    if settings.kubernetes.extended_support or not release.kept or name is None:
        return
    try:
        cluster = aws.eks.get_cluster(name=name, opts=lookup(settings))
    except Exception:  # noqa: BLE001 (no cluster to ask: live_version already warned)
        return
    policies = cluster.upgrade_policies or []
    if not policies or policies[0].support_type != "EXTENDED":
        return
    row = next((v for v in list_versions(lookup(settings))
                if minor_key(v.minor) == minor_key(release.minor)), None)
    if row is None or row.status != EXTENDED:
        return
    raise SettingsError([Problem(
        SUPPORT_SETTING, False,
        f"true while the cluster runs {release.minor}, which EKS keeps in extended support only "
        f"in {settings.region}{_until(row.extended_until)}: EKS disables extended support only "
        "on a cluster in standard support. Upgrade first (kubernetes.version, one minor at a "
        "time) to a minor in standard support, then set it to false. Nothing was changed")])
