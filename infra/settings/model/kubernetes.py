"""`kubernetes`: the control plane's version and who may reach its API."""

from __future__ import annotations

from pydantic import Field, field_validator

from infra.settings.model.api_access import FIND_YOUR_ADDRESS, api_access_cidr
from infra.settings.model.section import Section


class Kubernetes(Section):
    """The control plane."""

    version: str | None = Field(
        None, description="Kubernetes minor, e.g. 1.35; unset: the cloud's default on the first "
        "`pulumi up` (EKS, GKE's REGULAR channel, AKS in the region, asked when the program "
        "runs). A set minor must be one the cloud offers that day. Once the cluster exists, "
        "later runs keep the version it runs; a newer minor here upgrades it, one minor at a time.")
    extended_support: bool = Field(
        False,
        description=(
            "AWS only: accept a version in EKS extended support (billed per cluster hour) and "
            "keep the cluster there; off, a version past standard support is refused and EKS "
            "upgrades the cluster when standard support ends."
        ),
    )
    api_access_cidrs: list[str] = Field(
        description=(
            "CIDRs allowed to reach the public API endpoint (the machine running `pulumi up` must "
            "be inside one; a bare address is that address, /32). 0.0.0.0/0, documentation, private "
            "(RFC 1918), carrier-grade NAT, loopback and link-local ranges are refused. Set "
            "yours with "
            f"`{FIND_YOUR_ADDRESS}`."
        ),
    )

    allow_broad_api_access: bool = Field(
        False, description="Accept an apiAccessCidrs range broader than a /16 (IPv6: /48); "
        "off, such a range is refused (0.0.0.0/1 + 128.0.0.0/1 is all of IPv4).")

    @field_validator("version")
    @classmethod
    def _version_shape(cls, value: str | None) -> str | None:
        if value is None:
            return value
        parts = value.split(".")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise ValueError("must be a minor version like '1.33'")
        return value

    @field_validator("api_access_cidrs")
    @classmethod
    def _cidrs(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError(f"at least one CIDR, your own network: {FIND_YOUR_ADDRESS}")
        return [api_access_cidr(cidr, index) for index, cidr in enumerate(value)]
