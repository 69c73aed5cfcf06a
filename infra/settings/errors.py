"""One error that lists every bad setting, so a stack file is fixed in one pass."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CONFIG_NAMESPACE = "torchrec-cloud"


@dataclass(frozen=True)
class Problem:
    """One bad setting: where it is in the stack file, what it holds, and what is allowed."""

    path: str  # e.g. "sharedFileSystem.capacityGib"
    value: Any
    allowed: str

    def __str__(self) -> str:
        return f"  {CONFIG_NAMESPACE}:{self.path} = {self.value!r}: {self.allowed}"


class SettingsError(ValueError):
    """Raised before any resource is registered when the stack file breaks a rule."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        count = len(problems)
        lines = "\n".join(str(p) for p in problems)
        super().__init__(
            f"{count} bad setting{'s' if count != 1 else ''} in the stack file "
            f"(nothing was created):\n{lines}"
        )
