"""Names derived from the project and stack, so two stacks can live in one account."""

from __future__ import annotations

import re

import pulumi


def name_prefix(project: str | None = None, stack: str | None = None, max_length: int = 24) -> str:
    """'<project>-<stack>' in lowercase letters, digits and '-', short enough for every cloud."""
    raw = f"{project or pulumi.get_project()}-{stack or pulumi.get_stack()}".lower()
    cleaned = re.sub(r"[^a-z0-9-]+", "-", raw).strip("-")
    return cleaned[:max_length].rstrip("-")


def compact(prefix: str, suffix: str = "", max_length: int = 24) -> str:
    """Letters and digits only (storage accounts, ACR): '<prefix><suffix>', cut to fit."""
    return re.sub(r"[^a-z0-9]", "", f"{prefix}{suffix}".lower())[:max_length]
