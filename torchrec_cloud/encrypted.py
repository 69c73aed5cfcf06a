"""Checking a stack whose file holds encrypted values, without its secrets provider.

`pulumi up` gets every `{secure: ...}` decrypted in place, the rest of its object intact
(pulumi/pulumi sdk/go/common/resource/config/value.go: `Value()` -> `decryptObject`). So the
check puts a stand-in of the setting's own type in place of each encrypted leaf only, judges
everything else as `pulumi up` would, and says of exactly those places "encrypted: not checked"
instead of a false "required" or a problem with the stand-in.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import Any

from infra.settings.errors import CONFIG_NAMESPACE, Problem, config_path
from infra.settings.loader import PLACEHOLDERS

Place = tuple[str | int, ...]  # a setting's place, e.g. ("kubernetes", "apiAccessCidrs", 0)
_PART = re.compile(r"[^.\[\]]+")


def encrypted_places(secrets: Mapping[str, Iterable[Place]]) -> list[Place]:
    """The places of this project's encrypted values (StackConfig.secrets), key first."""
    prefix = f"{CONFIG_NAMESPACE}:"
    return [(key.removeprefix(prefix), *inner) for key, places in secrets.items()
            if key.startswith(prefix) for inner in places]


def _trainer_default(flag: str) -> Any:
    from trainer.config import build_parser

    for action in build_parser()._actions:  # the trainer's own default for the flag
        if action.dest == flag:
            return action.default
    return None


def _stand_in(values: dict[str, Any], place: Place, encrypted: set[Place]) -> Any:
    """A value of the setting's type that passes its own rules, or None: leave it unset, so
    its default stands in (the settings' defaults are valid by construction)."""
    if place[:1] == ("cloud",):
        return None
    for where, placeholder in PLACEHOLDERS.items():  # required values with no default
        if place == where:
            return copy.deepcopy(placeholder)
        if place[:-1] == where and isinstance(placeholder, list):
            return placeholder[0]
    if len(place) == 3 and place[:2] == ("job", "trainerArgs"):
        return _trainer_default(str(place[2]))
    parent = _at(values, place[:-1])
    if isinstance(parent, list):  # an element: the cloud's default list's, else a sibling's
        readable = [v for i, v in enumerate(parent) if (*place[:-1], i) not in encrypted]
        defaults = _at(_cloud_defaults(values), place[:-1])
        fresh = [v for v in defaults or [] if v not in readable]  # no duplicate to refuse
        return fresh[0] if fresh else readable[0] if readable else None
    return None


def _cloud_defaults(values: dict[str, Any]) -> dict[str, Any]:
    from infra.catalog import Cloud
    from infra.settings.defaults import with_cloud_defaults

    try:
        return with_cloud_defaults({"cloud": Cloud(values.get("cloud")).value})
    except ValueError:
        return {}


def _at(values: Any, place: Place) -> Any:
    for part in place:
        try:
            values = values[part]
        except (KeyError, IndexError, TypeError):
            return None
    return values


def with_stand_ins(values: dict[str, Any], places: Iterable[Place],
                   cloud: str | None = None) -> dict[str, Any]:
    """The project's values with each encrypted leaf replaced (see the module's doc); `cloud`
    stands in for an encrypted `cloud` (the stack's name, where it names one)."""
    result = copy.deepcopy(values)
    places = list(places)
    encrypted = set(places)
    dropped: list[Place] = []
    for place in places:
        parent = _at(result, place[:-1])
        if place == ("cloud",):
            result.pop("cloud", None)
            if cloud:
                result["cloud"] = cloud
            continue
        stand_in = _stand_in(result, place, encrypted)
        if stand_in is not None:
            parent[place[-1]] = stand_in
        elif isinstance(parent, dict):
            parent.pop(place[-1], None)
        else:
            dropped.append(place)
    for place in sorted(dropped, key=lambda p: -int(p[-1])):  # last first: indices hold
        parent = _at(result, place[:-1])
        if isinstance(parent, list):
            del parent[int(place[-1])]
    return result


def parts(path: str) -> tuple[str, ...]:
    """A problem's path as its parts: `zones.1`, `zones[1]` -> ("zones", "1")."""
    return tuple(_PART.findall(path))


def on_encrypted(problem: Problem, places: Iterable[Place]) -> bool:
    """Whether the problem is about an encrypted value (its place or inside it)."""
    found = parts(problem.path)
    return any(found[:len(place)] == tuple(str(p) for p in place) for place in places)


def shown_place(place: Place) -> str:
    return f"{CONFIG_NAMESPACE}:{config_path(place)}"
