"""Read the stack's configuration once and turn it into validated Settings or one SettingsError."""

from __future__ import annotations

import difflib
import json
import re
import shlex
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from infra.catalog.cloud import Cloud
from infra.settings.defaults import with_cloud_defaults
from infra.settings.errors import (CONFIG_NAMESPACE, Problem, SettingsError, config_path,
                                   rename_commands, set_command, shown, use_stack)
from infra.settings.model.stack_file import Settings
from infra.settings.all_rules import check_all
from infra.settings.rules import FS_KIND_BY_CLOUD

FS_KINDS = set(FS_KIND_BY_CLOUD.values())  # the union tags pydantic puts in locations


def _locations(error: ValidationError) -> list[tuple[tuple[str | int, ...], dict[str, Any]]]:
    # Drop the discriminator tag pydantic adds to union locations (e.g. "fsx-lustre").
    return [
        (tuple(part for part in item["loc"] if part not in FS_KINDS), dict(item))
        for item in error.errors()
    ]


def _flat_keys(error: ValidationError) -> list[str]:
    """Top-level keys that are paths (`kubernetes.apiAccessCidrs[0]`): set without --path."""
    return [str(item["loc"][0]) for item in error.errors()
            if item["type"] == "extra_forbidden" and len(item["loc"]) == 1
            and any(mark in str(item["loc"][0]) for mark in ".[")]


def _named_by_flat_key(path: str, flat_keys: list[str]) -> bool:
    """Whether a flat key sets the setting at `path` (or inside it): its message already says
    how to set it, so "required (not set)" for the same setting would only repeat it."""
    return any(key == path or key.startswith((path + ".", path + "[")) for key in flat_keys)


def _type_problems(error: ValidationError) -> list[Problem]:
    problems = []
    flat_keys = _flat_keys(error)
    for loc, item in _locations(error):
        if item["type"] == "missing" and _named_by_flat_key(config_path(loc), flat_keys):
            continue
        value = None if item["type"] == "missing" else item.get("input")
        allowed = str(item["msg"]).removeprefix("Value error, ")
        if item["type"] == "missing":
            allowed = f"required: {_description(loc) or 'see docs/settings.md'}"
        if item["type"] == "extra_forbidden":
            allowed = _unknown_key(tuple(item["loc"]), value)
        if item["type"] in ("enum", "literal_error"):
            expected = str(item.get("ctx", {}).get("expected", ""))
            allowed = _choice_hint(loc, value, allowed, expected)
        if item["type"] in SHAPES:
            allowed = _shape_hint(loc, value, item["type"])
        problems.append(Problem(".".join(str(part) for part in loc), value, allowed))
    return problems


# pydantic's type errors ("Input should be a valid list") -> the shape the setting takes.
SHAPES = {
    "list_type": "a list", "int_type": "an integer", "int_parsing": "an integer",
    "int_from_float": "a whole number", "float_type": "a number", "float_parsing": "a number",
    "bool_type": "true or false", "bool_parsing": "true or false", "string_type": "text",
    "dict_type": "a map of keys", "model_type": "a map of keys",
}


def _given(value: Any) -> str:
    """What kind of value the stack file holds, in the stack file's words."""
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    return "a map" if isinstance(value, dict) else "null"


def list_commands(path: str, value: Any) -> str:
    """The commands that store `value` as a list item by item (`--path 'a.b[0]' x`): a plain
    `--path a.b x` stores text, which a list setting refuses. Text with commas is one item
    each (`pulumi config set` has no list syntax of its own)."""
    if isinstance(value, list):
        items = [str(v) for v in value]
    elif isinstance(value, str) and value.strip():
        # `[a, b]` typed as text (`pulumi config set zones '[a, b]'` stores a string): the
        # items without the brackets and quotes.
        text = value.strip().removeprefix("[").removesuffix("]")
        items = [part.strip().strip("'\"") for part in text.split(",") if part.strip().strip("'\"")]
    else:
        items = ["<value>"]
    return "; ".join(f"`{set_command(f'{path}[{index}]', item)}`"
                     for index, item in enumerate(items))


def _shape_hint(loc: tuple[str | int, ...], value: Any, error_type: str) -> str:
    """pydantic's "Input should be a valid integer" as the rest of the messages read: what was
    given, what is allowed, and the command with the right shape."""
    path = config_path(loc)
    shape = SHAPES[error_type]
    head = f"{shape} allowed, {_given(value)} given"
    quoted = shlex.quote(path)
    if error_type == "list_type":
        return (f"{head}; remove it with `pulumi config rm --path {quoted}` and set each item "
                f"with {list_commands(path, value)}")
    if error_type in ("dict_type", "model_type"):
        return (f"{head}; remove it with `pulumi config rm --path {quoted}` and set each key "
                f"with `pulumi config set --path {shlex.quote(path + '.<key>')} <value>`")
    placeholder = {"an integer": "<integer>", "a whole number": "<integer>",
                   "a number": "<number>", "true or false": "true"}.get(shape)
    if placeholder is None:  # text: the value as text
        # `--path` stores true/false and integers as such again; --type string keeps text
        # (`pulumi config set --help`: "--type string  Save the value as the given type").
        typed = "--type string " if isinstance(value, (bool, int, float)) else ""
        command = set_command(path, _flow_text(value)).replace(
            "pulumi config set ", f"pulumi config set {typed}", 1)
        return f"{head}; set it with `{command}`"
    command = f"`pulumi config set --path {quoted} {placeholder}`"
    return f"{head}; set it with {command}" + (" (or false)" if shape == "true or false" else "")


def _flow_text(value: Any) -> str:
    return value if isinstance(value, str) else shown(value)


def _model_at(raw_loc: tuple[str | int, ...]) -> Any:
    """The settings model at a location as pydantic reports it (with the file system's kind
    tag, which picks the member of that union), or None below a plain dict or list."""
    model: Any = Settings
    parts = list(raw_loc)
    while parts:
        part = parts.pop(0)
        fields = getattr(model, "model_fields", None) or {}
        field = next((f for n, f in fields.items() if (f.alias or n) == part), None)
        if field is None:
            return None
        members = [a for a in getattr(field.annotation, "__args__", (field.annotation,))
                   if hasattr(a, "model_fields")]
        if len(members) > 1 and parts:  # a tagged union: the next part is the member's kind
            tag = parts.pop(0)
            members = [m for m in members if m.model_fields["kind"].default == tag]
        model = members[0] if members else None
    return model


def _choice_hint(loc: tuple[str | int, ...], value: Any, allowed: str, expected: str) -> str:
    """pydantic's "Input should be 'onDemand' or 'spot'", with the closest choice and the
    command that sets it; case does not count (`SPOT` is 'spot'). With no close choice, no
    command: a guess could set the opposite of what was meant (onDemand for spot costs more)."""
    choices = re.findall(r"'([^']*)'", expected)
    by_lower = {choice.lower(): choice for choice in choices}
    close = difflib.get_close_matches(str(value).lower(), list(by_lower), n=1, cutoff=0.5)
    if not close:
        return allowed
    pick = by_lower[close[0]]
    return (f"did you mean {pick!r}? {allowed}; set it with "
            f"`{set_command(config_path(loc), pick)}`")


def _unknown_key(raw_loc: tuple[str | int, ...], value: Any = None) -> str:
    """What a key that is not a setting at its level should have been."""
    key = str(raw_loc[-1])
    if len(raw_loc) == 1 and ("." in key or "[" in key):
        # `pulumi config set 'a.b[0]' x` without --path stores one key named "a.b[0]".
        given = value if isinstance(value, str) else shown(value)
        setting = f"`{set_command(key, given)}`"
        if not key.endswith("]") and _is_list(key):  # --path 'a.b' x would store text
            setting = list_commands(key, value)
        return (f"looks like `pulumi config set` without `--path`, which stores {key!r} as one "
                f"flat key; remove it with `pulumi config rm {shlex.quote(key)}` and set it "
                f"with {setting}")
    model = _model_at(raw_loc[:-1])
    keys = [f.alias or n for n, f in getattr(model, "model_fields", {}).items()]
    close = difflib.get_close_matches(str(raw_loc[-1]), keys, n=1, cutoff=0.6)
    if close:
        bad = config_path(_without_tags(raw_loc))
        good = config_path((*_without_tags(raw_loc)[:-1], close[0]))
        return (f"not a setting here (misspelt?); did you mean {close[0]!r}? "
                + rename_commands(bad, good, value))
    return f"not a setting here (misspelt?); the settings here: {', '.join(keys)}"


def _without_tags(raw_loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    return tuple(part for part in raw_loc if part not in FS_KINDS)


def _is_list(dotted: str) -> bool:
    """Whether the setting at a dotted path (`kubernetes.apiAccessCidrs`) is a list."""
    parts = tuple(dotted.split("."))
    model = _model_at(parts[:-1])
    fields = getattr(model, "model_fields", None) or {}
    field = next((f for n, f in fields.items() if (f.alias or n) == parts[-1]), None)
    return field is not None and getattr(field.annotation, "__origin__", None) is list


def _description(loc: tuple[str | int, ...]) -> str | None:
    """The field's documented meaning, found by walking the model along a camelCase path."""
    model: Any = Settings
    description = None
    for part in loc:
        fields = getattr(model, "model_fields", None)
        if not fields:
            return None
        field = next((f for n, f in fields.items() if (f.alias or n) == part), None)
        if field is None:
            return None
        description, model = field.description, field.annotation
        for option in getattr(model, "__args__", ()):  # Optional[Section]: look inside
            if hasattr(option, "model_fields"):
                model = option
    return description


# Stand-ins for required values without a default, used only to let the other rules run.
PLACEHOLDERS: dict[tuple[str | int, ...], Any] = {
    # a public address: documentation, private and other unreachable ranges are refused
    ("kubernetes", "apiAccessCidrs"): ["81.2.69.142/32"],
    ("gcp", "project"): "placeholder",
}


def _without(values: dict[str, Any], loc: tuple[str | int, ...]) -> None:
    """Replace one bad value by its default (or a stand-in) so the rest can still be checked."""
    node: Any = values
    for part in loc[:-1]:
        if not isinstance(node, (dict, list)):
            return
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return
    if isinstance(node, dict):
        node.pop(loc[-1], None)
        if loc in PLACEHOLDERS:
            node[loc[-1]] = PLACEHOLDERS[loc]


def _validate_collecting(values: dict[str, Any]) -> tuple[Settings | None, list[Problem]]:
    """Type-check; on failure, retry without the bad values so later rules still report.

    Only the first attempt's errors are reported: a retry exists to let the cross-field rules
    run on what is left, not to report the holes it made.
    """
    try:
        return Settings.model_validate(values), []
    except ValidationError as error:
        problems = _type_problems(error)
        last_error = error
    for _ in range(3):
        for loc, _item in _locations(last_error):
            if loc:
                _without(values, loc)
        try:
            return Settings.model_validate(values), problems
        except ValidationError as error:
            last_error = error
    return None, problems


def settings_and_problems(raw: dict[str, Any]) -> tuple[Settings | None, list[Problem]]:
    """The settings as far as they validate, and every problem found (none: all is well).
    `make check` filters the problems on values it cannot read (encrypted ones) itself."""
    try:
        Cloud(raw.get("cloud"))
    except ValueError:  # every default and rule depends on the cloud: name only that
        return None, [Problem("cloud", raw.get("cloud"), "required: one of aws, azure, gcp")]
    settings, problems = _validate_collecting(with_cloud_defaults(raw))
    if settings is not None:
        bad_paths = {problem.path for problem in problems}
        problems += [p for p in check_all(settings) if p.path not in bad_paths]
    # One line per bad value: two zones of another region are two lines, the same value
    # refused twice by one rule (a retry of the type check) is one.
    return settings, list({(p.path, shown(p.value), p.allowed): p for p in problems}.values())


def settings_from_mapping(raw: dict[str, Any]) -> Settings:
    """Validate a stack's values (camelCase keys, without the project prefix)."""
    settings, problems = settings_and_problems(raw)
    if problems or settings is None:
        raise SettingsError(problems)
    return settings


def project_values(config: Mapping[str, str]) -> dict[str, Any]:
    """The `torchrec-cloud:*` values of a stack's config as Pulumi hands it to the program
    (`"<namespace>:<key>"` -> text; structured values as JSON text), parsed from JSON where
    they are structured. `pulumi up` (below) and `make check` (torchrec_cloud/check.py) both
    read the stack through this."""
    values: dict[str, Any] = {}
    for full_key, text in config.items():
        namespace, _, key = full_key.partition(":")
        if namespace != CONFIG_NAMESPACE:
            continue
        try:
            values[key] = json.loads(text)
        except (TypeError, json.JSONDecodeError):
            values[key] = text
    return values


def _all_project_config() -> dict[str, Any]:
    """Every `torchrec-cloud:*` value of the running stack."""
    import pulumi  # only `pulumi up` needs its runtime; `make check` reads the file itself

    everything = dict(pulumi.runtime.config.get_config_env())
    everything.update(pulumi.runtime.config.CONFIG.get())
    return project_values(everything)


def load_settings() -> Settings:
    """The stack's settings, validated; raises SettingsError listing every bad value, each
    fix command naming the running stack (`--stack`)."""
    import pulumi

    use_stack(pulumi.get_stack())
    settings = settings_from_mapping(_all_project_config())
    from infra.settings.security_rules import unpinned_image_notice

    if notice := unpinned_image_notice(settings):
        pulumi.log.warn(notice)
    return settings


def with_kubernetes_minor(settings: Settings, minor: str) -> Settings:
    """The settings with the minor the program chose (infra/kubernetes_release.py), every rule
    checked again: a rule that depends on the version (a spot node's notice) judges the real one."""
    kubernetes = settings.kubernetes.model_copy(update={"version": minor})
    chosen = settings.model_copy(update={"kubernetes": kubernetes})
    problems = check_all(chosen)
    if problems:
        raise SettingsError(problems)
    return chosen
