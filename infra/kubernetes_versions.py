"""The managed services' Kubernetes calendars, as dated tables: when each minor leaves EKS
standard and extended support, and when AKS offers it (GA, community support, LTS). For AKS the
table is advice only (`aks_advice`, warnings): which minors AKS creates comes from AKS itself
when the program runs (infra/azure/versions.py).

EKS source: Amazon EKS User Guide, "Understand the Kubernetes version lifecycle on EKS", section
"Amazon EKS Kubernetes release calendar"
(https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html; the same dates are
on https://endoflife.date/amazon-eks). A minor is in standard support for 14 months after its
EKS release, then in extended support (billed per cluster hour) for 12 more; after that EKS
upgrades the cluster itself. Add a row when EKS releases a minor.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
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


# --- AKS: the calendar, for advice (what AKS creates is asked of AKS: infra/azure/versions.py) --
# The AKS Kubernetes release calendar (https://learn.microsoft.com/azure/aks/supported-kubernetes-
# versions, "AKS Kubernetes release calendar" and "LTS versions"; MicrosoftDocs/azure-aks-docs
# articles/aks/supported-kubernetes-versions.md @ fb060abe, 2026-08-21). A month means its last
# day, as the page says. AKS creates a cluster only at a version in community support (N-2;
# platform support, N-3, excludes "Cluster creation"), or in LTS with the Premium tier and the
# AKSLongTermSupport plan (https://learn.microsoft.com/azure/aks/long-term-support).
AKS_CALENDAR_DATE = date(2026, 8, 21)


@dataclass(frozen=True)
class AksVersion:
    ga: date  # AKS GA (last day of the month: every region has it by then)
    end_of_life: date  # end of community support
    lts_end_of_life: date  # end of Long-Term Support


AKS_KUBERNETES_VERSIONS: dict[str, AksVersion] = {
    "1.29": AksVersion(date(2024, 3, 31), date(2025, 3, 31), date(2026, 4, 30)),
    "1.30": AksVersion(date(2024, 7, 31), date(2025, 8, 22), date(2026, 7, 31)),
    "1.31": AksVersion(date(2024, 11, 30), date(2025, 11, 1), date(2026, 11, 30)),
    "1.32": AksVersion(date(2025, 4, 30), date(2026, 3, 31), date(2027, 3, 31)),
    "1.33": AksVersion(date(2025, 6, 30), date(2026, 7, 31), date(2027, 7, 31)),
    "1.34": AksVersion(date(2025, 11, 30), date(2026, 11, 30), date(2027, 11, 30)),
    "1.35": AksVersion(date(2026, 3, 31), date(2027, 3, 31), date(2028, 3, 31)),
    "1.36": AksVersion(date(2026, 6, 30), date(2027, 6, 30), date(2028, 6, 30)),
    "1.37": AksVersion(date(2026, 10, 31), date(2027, 10, 31), date(2028, 10, 31)),
}

# How far ahead the end of community support is worth a warning: a minor upgrade of a GPU
# cluster is planned, one minor at a time.
AKS_ADVICE_DAYS = 90


def aks_advice(minor: str, day: date, long_term_support: bool) -> list[str]:
    """Warnings about `minor` on `day` from the calendar above: community support about to end
    or ended, and what Long-Term Support costs. Never a refusal: AKS's own list decides."""
    row = AKS_KUBERNETES_VERSIONS.get(minor)
    advice: list[str] = []
    if long_term_support:
        advice.append("azure.longTermSupport: Long-Term Support is billed with the Premium tier "
                      "(per cluster hour, https://learn.microsoft.com/azure/aks/long-term-support)")
    if row is None:
        return advice
    if day > row.end_of_life:
        if long_term_support:
            advice.append(f"{minor} left AKS community support on {row.end_of_life}; its "
                          f"Long-Term Support ends on {row.lts_end_of_life}")
        else:
            advice.append(f"{minor} left AKS community support on {row.end_of_life}: AKS no "
                          "longer patches it; set kubernetes.version to the next minor and "
                          "`pulumi up`")
    elif row.end_of_life - day <= timedelta(days=AKS_ADVICE_DAYS):
        advice.append(f"{minor} leaves AKS community support on {row.end_of_life}; plan the "
                      "upgrade to the next minor (kubernetes.version, one minor at a time)")
    return advice
