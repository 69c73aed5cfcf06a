"""The managed services' Kubernetes calendars, where a cloud's API does not give them: advice
only (warnings), never a gate. For AKS, which minors it creates comes from AKS itself when the
program runs (infra/azure/versions.py); this calendar only warns (`aks_advice`).

EKS needs no table here: DescribeClusterVersions answers each minor's support status and the
ends of its standard and extended support when the program runs (infra/aws/versions.py), so
the dates never age in this repository.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta


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
