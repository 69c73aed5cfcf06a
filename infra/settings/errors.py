"""One error that lists every bad setting, so a stack file is fixed in one pass."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from enum import Enum
from typing import Any

CONFIG_NAMESPACE = "torchrec-cloud"
NOT_SET = "(not set)"
PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
# A fix command in a message, not yet naming its stack (a mention of the command alone,
# "`pulumi config set` without `--path`", is no command to paste).
CONFIG_COMMAND = re.compile(
    r"\bpulumi config (?:set|rm)\b(?! --stack)(?!`)|\btorchrec-cloud doctor\b(?! --stack)")

# The stack whose file the messages' commands edit. Rules write their messages without it
# (they judge values, not stacks); it is added where a problem is shown, so a pasted command
# edits this stack's file whichever stack `pulumi stack select` chose. Set once per process by
# whoever reads a stack: `pulumi up` (loader.load_settings) and `torchrec_cloud check`.
_stack: str | None = None


def use_stack(name: str | None) -> None:
    """Name the stack the fix commands in messages edit (None: leave them without --stack)."""
    global _stack
    _stack = name or None


def for_stack(text: str) -> str:
    """`pulumi config set ...` -> `pulumi config set --stack <name> ...` (and `rm`)."""
    if _stack is None:
        return text
    return CONFIG_COMMAND.sub(lambda found: f"{found.group(0)} --stack {shlex.quote(_stack)}",
                              text)


def shown(value: Any) -> str:
    """A value as the user wrote it in the stack file (YAML flow style), not a Python repr:
    unset is "(not set)", lists and maps are `[a, b]` / `{key: value}`, booleans true/false;
    text keeps its quotes so a stray space stays visible."""
    if value is None:
        return NOT_SET
    return _flow(value)


def _flow(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, dict):
        items = (f"{k if isinstance(k, str) and PLAIN_KEY.match(k) else _flow(k)}: {_flow(v)}"
                 for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(value, (list, tuple, set, frozenset)):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    return str(value)


def config_path(loc: tuple[str | int, ...] | list[str | int]) -> str:
    """A location as `pulumi config set --path` spells it: `kubernetes.apiAccessCidrs[0]`."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def set_command(path: str, value: Any) -> str:
    """The command that sets one value, shell-quoted as a user pastes it; a value that starts
    with '-' (a spot maxPrice of -1) after `--`, or the CLI reads it as a flag
    (pulumi/pulumi#892)."""
    text = str(value)
    end_of_flags = "-- " if text.startswith("-") else ""
    return f"pulumi config set --path {shlex.quote(path)} {end_of_flags}{shlex.quote(text)}"


def rm_command(path: str) -> str:
    """The command that removes one value, its path shell-quoted: a tag key holding `'` or `;`
    stays one argument when the user pastes the command."""
    return f"pulumi config rm --path {shlex.quote(path)}"


def rename_commands(bad: str, good: str, value: Any) -> str:
    """The commands that move a value from a misspelt path to the one meant: `pulumi config rm
    --path` the old one, then set the new one with the same value (a map key by key)."""
    remove = f"`pulumi config rm --path {shlex.quote(bad)}`"
    if isinstance(value, (dict, list)):
        return (f"remove it with {remove} and set each of its values under {good} with "
                f"`pulumi config set --path {shlex.quote(good + '.<key>')} <value>`")
    text = value if isinstance(value, str) else shown(value)
    return f"remove it with {remove} and set it with `{set_command(good, text)}`"


@dataclass(frozen=True)
class Problem:
    """One bad setting: where it is in the stack file, what it holds, and what is allowed."""

    path: str  # e.g. "sharedFileSystem.capacityGib"
    value: Any
    allowed: str
    # The same refusal in parts, for a command that takes this value another way than the
    # stack file (submit's --nodes and trainer flags, torchrec_cloud/submit.py), where the
    # command that edits it in the stack file is no fix: `reason` is `allowed` without its
    # commands; `elsewhere` the fixes that change another setting of the stack instead, each
    # complete with its command. Both empty where `allowed` names no command.
    reason: str = ""
    elsewhere: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"  {CONFIG_NAMESPACE}:{self.path} = {shown(self.value)}: {for_stack(self.allowed)}"


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
