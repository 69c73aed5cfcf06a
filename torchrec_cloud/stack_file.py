"""A stack's configuration read from `Pulumi.<stack>.yaml`, as `pulumi up` hands it to the
program, without the Pulumi CLI, a backend or credentials.

What the CLI does, and so what this mirrors (pulumi/pulumi sdk/go/common/resource/config/
value.go, `unmarshalValue`; the stack file is YAML read with gopkg.in/yaml.v2,
sdk/go/common/encoding/marshal.go):
- a scalar value is taken as a string first: its text as written (`nodes: 2` -> "2", quotes
  removed, `key:` with nothing -> "");
- anything else (a map or list) is kept as an object and passed to the program as JSON text,
  its scalars typed by YAML 1.1 (PyYAML's SafeLoader resolves them as yaml.v2 does, but for
  `y`/`n`, which yaml.v2 alone reads as booleans);
- `{secure: ...}` is a secret only the stack's secrets provider can decrypt; for the program
  the CLI decrypts it where it stands, a whole value or a leaf inside a map or list
  (`Value()` -> `decryptObject`, which replaces each `{secure: ...}` leaf by its decrypted
  text and keeps the rest of the object), so here each one is kept as written and its place
  recorded: the check reads everything around it (torchrec_cloud/encrypted.py);
- a key without a namespace belongs to the project (`name` in Pulumi.yaml).
The program then reads every `torchrec-cloud:*` value through
infra/settings/loader.py `project_values`, the same function `pulumi up` uses.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from torchrec_cloud.invocation import cli, typed


def known_stacks(root: Path) -> list[str]:
    """The stacks this project has a file for (Pulumi.<stack>.yaml)."""
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in root.glob("Pulumi.*.yaml"))


def unknown_stack(stack: str, root: Path) -> str | None:
    """The one message every verb (status, logs, submit, doctor, ...) gives for a stack this
    project has no file for, before a typo reaches the Pulumi CLI or kubectl; None if it has."""
    known = known_stacks(root)
    if stack in known:
        return None
    close = difflib.get_close_matches(stack, known, n=1, cutoff=0.6)
    new_file = typed(root / f"Pulumi.{stack}.yaml")
    hint = (f"; did you mean --stack {close[0]}?" if close else
            f"; a new stack: copy one of them to {new_file}, then "
            f"`{cli(f'check --stack {stack}')}`")
    return (f"no stack {stack!r} in this project (its stacks: {', '.join(known) or 'none'}; a "
            f"stack is Pulumi.<stack>.yaml){hint}")


@dataclass
class StackConfig:
    """The config of one stack file: `"<namespace>:<key>"` -> text, as the program sees it."""

    path: Path
    config: dict[str, str] = field(default_factory=dict)
    # Where each encrypted value stands: "<namespace>:<key>" -> its places inside the value
    # (() for the whole value, ("apiAccessCidrs", 0) for one leaf); config keeps it as written.
    secrets: dict[str, list[tuple[str | int, ...]]] = field(default_factory=dict)
    environments: list[str] = field(default_factory=list)  # Pulumi ESC environments imported


class StackFileError(ValueError):
    """The file cannot be read as a stack file at all (missing, not YAML, no mapping)."""


# The top-level keys of a stack file (pulumi/pulumi sdk/go/common/workspace/project.go,
# ProjectStack: secretsprovider, encryptedkey, encryptionsalt, config, environment).
STACK_FILE_KEYS = ("config", "environment", "secretsprovider", "encryptedkey", "encryptionsalt")


def _unknown_keys(path: Path, keys: list[str]) -> None:
    """A stack file with keys the CLI does not know, or whose settings are under no `config:`
    map, is named as such: read on, every setting would be "(not set): required"."""
    unknown = [key for key in keys if key not in STACK_FILE_KEYS]
    if not unknown:  # no `config:` at all: every value may come from an ESC environment
        return
    named = []
    for key in unknown:
        close = difflib.get_close_matches(key, STACK_FILE_KEYS, n=1, cutoff=0.6)
        named.append(f"{key!r} (did you mean {close[0]!r}?)" if close else repr(key))
    if "config" in keys:
        raise StackFileError(f"{path}: unknown top-level key{'s' if len(named) > 1 else ''} "
                             f"{', '.join(named)}; a stack file has {', '.join(STACK_FILE_KEYS)}")
    where = f"; unknown top-level {'keys' if len(named) > 1 else 'key'} {', '.join(named)}" \
        if named else ""
    raise StackFileError(f"{path}: no `config:` map, so no setting can be read{where} (the "
                         "settings go under `config:`, as `pulumi config set` writes them)")


# The most values a stack file may expand to once its aliases are followed. A stack file holds
# a few hundred; a "billion laughs" file (each anchor a list of ten aliases of the one before)
# composes in microseconds but expands to 10^9 values, which would take the memory of the
# machine running `make check`. Composing keeps one node per anchor, so the expanded size is
# counted on the node graph, without building it.
MAX_EXPANDED_VALUES = 100_000


def _expanded_size(root: yaml.Node) -> int:
    """How many values `root` becomes once every alias is expanded, capped just past the bound
    (memoised per node: an alias is the same node object as its anchor)."""
    sizes: dict[int, int] = {}

    def size(node: yaml.Node, depth: int) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        if depth > 1000:  # a self-referencing anchor, or absurd nesting
            return MAX_EXPANDED_VALUES + 1
        sizes[id(node)] = MAX_EXPANDED_VALUES + 1  # until known: a cycle counts as too many
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        else:
            children = []
        total = 1
        for child in children:
            total = min(total + size(child, depth + 1), MAX_EXPANDED_VALUES + 1)
        sizes[id(node)] = total
        return total

    return size(root, 0)


# The deepest nesting of maps and lists a stack file may have. Its settings go 5 deep; PyYAML
# composes nested nodes by recursion, so thousands of `[` would end in a RecursionError. The
# depth is counted on the scanner's tokens (no recursion) before anything is composed.
MAX_NESTING = 100
_OPENS = (yaml.BlockMappingStartToken, yaml.BlockSequenceStartToken,
          yaml.FlowMappingStartToken, yaml.FlowSequenceStartToken)
_CLOSES = (yaml.BlockEndToken, yaml.FlowMappingEndToken, yaml.FlowSequenceEndToken)


def _too_deep_at(text: str) -> int | None:
    """The line where the nesting first passes MAX_NESTING, or None."""
    depth = 0
    for token in yaml.scan(text, Loader=yaml.SafeLoader):
        if isinstance(token, _OPENS):
            depth += 1
            if depth > MAX_NESTING:
                return token.start_mark.line + 1
        elif isinstance(token, _CLOSES):
            depth -= 1
    return None


def _duplicate_key(root: yaml.Node) -> tuple[str, int, int] | None:
    """A key written twice in one map: (key, first line, second line). The Pulumi CLI reads the
    stack file with gopkg.in/yaml.v2's `Unmarshal`, which is not strict ("UnmarshalStrict is
    like Unmarshal except that ... mapping keys that are duplicates, will result in an error",
    yaml.v2 yaml.go), so `pulumi up` would keep the last value and drop the first silently."""
    seen: set[int] = set()
    pending = [root]
    found: list[tuple[str, int, int]] = []
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[tuple[str, str], int] = {}
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                    line = key.start_mark.line + 1
                    if (key.tag, key.value) in first:
                        found.append((key.value, first[(key.tag, key.value)], line))
                    first.setdefault((key.tag, key.value), line)
                pending += [key, value]
        elif isinstance(node, yaml.SequenceNode):
            pending += node.value
    return min(found, key=lambda dup: dup[2]) if found else None


def _load(path: Path) -> yaml.Node | None:
    try:
        text = path.read_text()
        deep = _too_deep_at(text)
        if deep is not None:
            raise StackFileError(
                f"{path}:{deep}: nested too deep at line {deep} (more than {MAX_NESTING} levels of "
                "maps and lists; a stack file's settings go 5 deep): nothing was read; write the "
                "value as `pulumi config set --path <setting> <value>` does")
        root = yaml.compose(text)
    except OSError as error:
        raise StackFileError(f"{path}: cannot be read ({error.strerror})") from None
    except yaml.YAMLError as error:
        raise StackFileError(f"{path}: not valid YAML: {error}") from None
    duplicate = _duplicate_key(root) if root is not None else None
    if duplicate is not None:
        key, first, second = duplicate
        raise StackFileError(
            f"{path}:{second}: the key {key!r} is written twice in one map (lines {first} and "
            f"{second}); `pulumi up` would keep the value at line {second} and drop the other "
            "without a word: delete the one you do not mean")
    if root is not None and _expanded_size(root) > MAX_EXPANDED_VALUES:
        raise StackFileError(
            f"{path}: its YAML aliases (*name) expand to more than {MAX_EXPANDED_VALUES:,} "
            "values, far past any stack's settings (an alias bomb, or an alias of itself); "
            "nothing was read: write the values out instead of repeating anchors "
            "(`pulumi config set --path <setting> <value>` writes plain values)")
    return root


def _is_secret(value: Any) -> bool:
    return isinstance(value, dict) and list(value) == ["secure"] and isinstance(value["secure"], str)


def secret_places(value: Any, at: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """The place of every `{secure: ...}` leaf in a value, as `decryptObject` finds them."""
    if _is_secret(value):
        return [at]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in secret_places(v, (*at, str(k)))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in secret_places(v, (*at, i))]
    return []


def project_name(project_file: Path) -> str:
    """`name` of Pulumi.yaml: the namespace of the stack file's keys written without one."""
    data = yaml.safe_load(project_file.read_text()) if project_file.exists() else None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise StackFileError(f"{project_file}: no project `name` (needed to read the stack file)")
    return data["name"]


def read_stack_file(path: Path, project: str) -> StackConfig:
    """The stack file's config as the CLI passes it to the program (see the module's doc)."""
    root = _load(path)
    result = StackConfig(path=path)
    if root is None:
        return result
    if not isinstance(root, yaml.MappingNode):
        raise StackFileError(f"{path}: a stack file is a YAML mapping with a `config:` key")
    _unknown_keys(path, [str(key.value) for key, _ in root.value])
    loader = yaml.SafeLoader("")
    for key_node, value_node in root.value:
        if key_node.value == "environment":
            environments = loader.construct_object(value_node, deep=True)
            result.environments = [str(e) for e in environments] if isinstance(environments, list) \
                else [str(environments)]
        if key_node.value != "config" or not isinstance(value_node, yaml.MappingNode):
            continue
        for config_key, config_value in value_node.value:
            name = config_key.value if ":" in config_key.value else f"{project}:{config_key.value}"
            if isinstance(config_value, yaml.ScalarNode):
                # A null scalar into a Go string is "" (yaml.v2); any other, its text.
                is_null = config_value.tag == "tag:yaml.org,2002:null"
                result.config[name] = "" if is_null else config_value.value
                continue
            try:  # safe_load's constructors: a language tag (!!python/...) is refused here
                value = loader.construct_object(config_value, deep=True)
            except yaml.YAMLError as error:
                mark = config_value.start_mark
                raise StackFileError(
                    f"{path}:{mark.line + 1}: {name} holds a YAML tag no stack file may use "
                    f"({config_value.tag}; Pulumi reads plain values only): write the value "
                    "without the tag") from error
            places = secret_places(value)
            if places:
                result.secrets[name] = places
            result.config[name] = json.dumps(value, default=str)
    return result
