"""The managed services' Kubernetes calendars, where a cloud's API does not give them: advice
only (warnings), never a gate. For AKS, which minors it creates comes from AKS itself when the
program runs (infra/azure/versions.py); this calendar only warns (`aks_advice`).

EKS needs no table here: DescribeClusterVersions answers each minor's support status and the
ends of its standard and extended support when the program runs (infra/aws/versions.py), so
the dates never age in this repository.

Also the one parser and comparison of Kubernetes and GKE version strings (`version_key`,
`version_reaches`), used by the catalog's stop notices, infra/gcp/versions.py and the settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta


def version_key(version: str) -> tuple[int, ...]:
    """'1.35.0-gke.1171000' -> (1, 35, 0, 1171000); '1.35' -> (1, 35); 'v1.33.4' -> (1, 33, 4).

    The one parser of Kubernetes and GKE version strings in this project: the stop notices
    (infra/catalog/stop_notices.py), the GKE version the program resolves (infra/gcp/versions.py) and the
    settings all compare versions through it and `version_reaches`.
    """
    release, _, build = version.lstrip("v").partition("-gke.")
    parts = [int("".join(ch for ch in part if ch.isdigit()) or 0) for part in release.split(".")]
    return (*parts, int(build)) if build.isdigit() else tuple(parts)


def version_reaches(version: str, minimum: str) -> bool:
    """Whether `version` is at least `minimum`.

    A version that names only a minor ('1.35') stands for the newest build of that minor: on
    GKE a minor-only version makes GKE pick "the highest valid patch+gke.N patch in the 1.X
    version" (Cluster.initialClusterVersion,
    https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters),
    so '1.35' reaches '1.35.0-gke.1171000'; the program passes the exact version GKE offers
    (infra/gcp/versions.py) wherever it knows it.
    """
    have, need = version_key(version), version_key(minimum)
    if len(have) <= 2 and have[:2] == need[:2]:
        return True
    return have >= need


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
