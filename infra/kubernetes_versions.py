"""When each Kubernetes minor leaves EKS standard and extended support: a dated table.

Source: Amazon EKS User Guide, "Understand the Kubernetes version lifecycle on EKS", section
"Amazon EKS Kubernetes release calendar"
(https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html; the same dates are
on https://endoflife.date/amazon-eks). A minor is in standard support for 14 months after its
EKS release, then in extended support (billed per cluster hour) for 12 more; after that EKS
upgrades the cluster itself. Add a row when EKS releases a minor.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from enum import Enum


@dataclass(frozen=True)
class EksSupport:
    """The last day of each support period of one Kubernetes minor on EKS."""

    standard_until: date
    extended_until: date


EKS_SUPPORT: dict[str, EksSupport] = {
    "1.30": EksSupport(standard_until=date(2025, 7, 23), extended_until=date(2026, 7, 23)),
    "1.31": EksSupport(standard_until=date(2025, 11, 26), extended_until=date(2026, 11, 26)),
    "1.32": EksSupport(standard_until=date(2026, 3, 23), extended_until=date(2027, 3, 23)),
    "1.33": EksSupport(standard_until=date(2026, 7, 29), extended_until=date(2027, 7, 29)),
    "1.34": EksSupport(standard_until=date(2026, 12, 2), extended_until=date(2027, 12, 2)),
    "1.35": EksSupport(standard_until=date(2027, 3, 27), extended_until=date(2028, 3, 27)),
}


class SupportPeriod(str, Enum):
    STANDARD = "standard"
    EXTENDED = "extended"
    ENDED = "ended"
    UNKNOWN = "unknown"  # not in the table (not released on EKS, or too old to list)


def eks_support_on(version: str, day: date) -> SupportPeriod:
    """Which EKS support period `version` is in on `day`."""
    support = EKS_SUPPORT.get(version)
    if support is None:
        return SupportPeriod.UNKNOWN
    if day <= support.standard_until:
        return SupportPeriod.STANDARD
    if day <= support.extended_until:
        return SupportPeriod.EXTENDED
    return SupportPeriod.ENDED


def in_standard_support(day: date) -> list[str]:
    """The minors in EKS standard support on `day`, oldest first."""
    return [v for v in EKS_SUPPORT if eks_support_on(v, day) == SupportPeriod.STANDARD]
