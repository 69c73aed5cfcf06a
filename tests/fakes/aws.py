"""Fakes for the aws stack's resources and invokes."""

from __future__ import annotations

from typing import Any

OUTPUTS: dict[str, Any] = {}
CALLS: dict[str, Any] = {}
