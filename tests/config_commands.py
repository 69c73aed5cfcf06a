"""What a printed `pulumi config set|rm [--stack S] --path P [V]` does, for tests that run the
fix commands check and the rules print (the Pulumi CLI is not installed here): on a settings
mapping (`config_after`) or on a stack file (`run_config_command`), one reading of the
command for both."""

from __future__ import annotations

import copy
import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from infra.settings.errors import CONFIG_NAMESPACE


def config_after(config: dict[str, Any], command: str, *, stack: str | None = None,
                 namespace: str = "") -> dict[str, Any]:
    """A copy of `config` with the command applied: keys as the settings name them (`job`), or
    as a stack file's config does with namespace `torchrec-cloud:`. The value is read as the CLI
    reads it under --path (numbers, true/false); an index one past a list's end appends to it.
    The command must name `stack` (or no stack where `stack` is None)."""
    words = shlex.split(command)
    assert words[:2] == ["pulumi", "config"] and words[2] in {"set", "rm"}, command
    verb, rest = words[2], words[3:]
    named = rest[1] if rest[:1] == ["--stack"] else None
    assert named == stack, f"{command} names stack {named}, not {stack}"
    rest = rest[2:] if named is not None else rest
    assert rest[:1] == ["--path"] and len(rest) == (2 if verb == "rm" else 3), command
    keys: list[Any] = [int(k) if k.isdigit() else k for k in re.findall(r"[^.\[\]]+", rest[1])]
    keys[0] = f"{namespace}{keys[0]}"
    out = copy.deepcopy(config)
    node: Any = out
    for key, after in zip(keys, keys[1:]):
        if isinstance(node, dict) and key not in node:
            node[key] = [] if isinstance(after, int) else {}
        node = node[key]
    if verb == "rm":
        del node[keys[-1]]
    elif isinstance(node, list) and keys[-1] == len(node):
        node.append(yaml.safe_load(rest[2]))
    else:
        node[keys[-1]] = yaml.safe_load(rest[2])
    return out


def run_config_command(path: Path, command: str) -> None:
    """The command applied to the stack file `Pulumi.<stack>.yaml` at `path`, whose stack the
    command must name."""
    data = yaml.safe_load(path.read_text())
    data["config"] = config_after(data["config"], command, stack=path.stem.split(".")[1],
                                  namespace=f"{CONFIG_NAMESPACE}:")
    path.write_text(yaml.safe_dump(data, sort_keys=False))
