"""Checking a stack whose file holds encrypted values, without its secrets provider.

`pulumi up` gets every `{secure: ...}` decrypted in place, the rest of its object intact
(pulumi/pulumi sdk/go/common/resource/config/value.go: `Value()` -> `decryptObject`). So the
check puts a stand-in of the setting's own type in place of each encrypted leaf only, judges
everything else as `pulumi up` would, and says of exactly those places "encrypted: not checked"
instead of a false "required" or a problem with the stand-in. A problem that only touches an
encrypted value (names it, holds it, or is about the list or section it is in) is judged on a
stand-in, so it is kept and marked as a possible false alarm (`doubtful`, `marked`); the zone
rule that reads the region is left out when the region is encrypted (`unjudged`).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import Any

from infra.settings.errors import CONFIG_NAMESPACE, Problem, config_path
from infra.settings.loader import PLACEHOLDERS
from infra.settings.model.stack_file import Settings

Place = tuple[str | int, ...]  # a setting's place, e.g. ("kubernetes", "apiAccessCidrs", 0)
_PART = re.compile(r"[^.\[\]]+")
FALSE_ALARM = "may be a false alarm (an encrypted value was stood in for)"


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
        candidates = list(_at(_cloud_defaults(values), place[:-1]) or [])
        if place[:-1] == ("zones",):  # a GPU zone must be one of the zones: the likeliest
            region = values.get("region")
            gpu_zones = [z for z in _at(values, ("gpuZones",)) or []
                         if isinstance(z, str) and isinstance(region, str)
                         and z.startswith(region)]
            candidates = [*gpu_zones, *candidates]
        fresh = [v for v in candidates if v not in parent]  # no duplicate to refuse
        return fresh[0] if fresh else readable[0] if readable else None
    return None


def _cloud_defaults(values: dict[str, Any]) -> dict[str, Any]:
    """The cloud's defaults, their zones named in the stack's region: a default zone of
    another region would be refused as one, and shown as if the user had written it."""
    from infra.catalog.cloud import Cloud
    from infra.settings.defaults import with_cloud_defaults
    from infra.settings.rules import zone_name

    try:
        cloud = Cloud(values.get("cloud"))
    except ValueError:
        return {}
    defaults = with_cloud_defaults({"cloud": cloud.value})
    region = values.get("region")
    if cloud != Cloud.AZURE and isinstance(region, str) and region != defaults["region"]:
        defaults["zones"] = [zone_name(cloud, region, letter) for letter in "ab"]
        defaults["gpuZones"] = defaults["zones"][:1]
    return defaults


def _region_of_zones(values: dict[str, Any], encrypted: set[Place]) -> str | None:
    """The region every readable zone names (AWS, GCP), to stand in for an encrypted region:
    the cloud's default region would put each of them in the wrong region."""
    from infra.catalog.cloud import Cloud
    from infra.regions import REGIONS

    try:
        regions = REGIONS[Cloud(values.get("cloud"))]
    except (ValueError, KeyError):
        return None
    zones = [zone for key in ("zones", "gpuZones")
             for i, zone in enumerate(values.get(key) or [])
             if (key, i) not in encrypted and isinstance(zone, str)]
    found = {max((r for r in regions if zone.startswith(r) and len(zone) > len(r)),
                 key=len, default=None) for zone in zones}
    return found.pop() if len(found) == 1 and None not in found else None


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
    stands in for an encrypted `cloud` (the stack's name, where it names one), the region
    every readable zone names for an encrypted `region`."""
    result = copy.deepcopy(values)
    places = list(places)
    encrypted = set(places)
    dropped: list[Place] = []
    # the cloud, then the region, first: the zones' stand-ins are named from them
    for place in sorted(places, key=lambda p: (p != ("cloud",), p != ("region",))):
        parent = _at(result, place[:-1])
        if place == ("cloud",):
            result.pop("cloud", None)
            if cloud:
                result["cloud"] = cloud
            continue
        if place == ("region",):
            result.pop("region", None)
            region = _region_of_zones(result, encrypted)
            if region:
                result["region"] = region
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


def on_encrypted(problem: Problem, places: Iterable[Place],
                 values: dict[str, Any] | None = None) -> bool:
    """Whether the problem is about an encrypted value itself: its place or inside it, or (given
    the values the check judged, stand-ins in) the list it is an element of, holding its
    stand-in (`zones = 'us-east-1a'` for an encrypted `zones[0]`)."""
    found = parts(problem.path)
    for place in places:
        inner = tuple(str(p) for p in place)
        if found[:len(inner)] == inner:
            return True
        if (values is not None and isinstance(place[-1], int) and found == inner[:-1]
                and problem.value == _at(values, place)):
            return True
    return False


def _names(place: Place) -> list[str]:
    """How a problem's text may name a place: `a.b[0]`, `a.b.0`."""
    # a top-level key alone (`gcp`, `region`, `zones`) is a common word in the messages
    return [config_path(place), ".".join(str(p) for p in place)] if len(place) > 1 else []


def doubtful(problem: Problem, places: Iterable[Place]) -> bool:
    """Whether the problem may come from a stand-in: its text names an encrypted place, its
    path is a section or list holding one, or its value is a section that holds one
    (`gpuPools.onDemand.desiredNodes = {..., maxNodes: 2}`)."""
    found = parts(problem.path)
    for place in places:
        inner = tuple(str(p) for p in place)
        if len(found) < len(inner) and inner[:len(found)] == found:
            return True  # a section or list that holds it
        if (found[:-1] == inner[:-1] and isinstance(problem.value, dict)
                and place[-1] in problem.value):
            return True  # a sibling's problem that shows it beside its own value
        if any(re.search(rf"(?<![\w.\[]){re.escape(name)}(?!\w)", problem.allowed)
               for name in _names(place)):
            return True
    return False


class _Encrypted:
    """Shown in place of a stand-in inside a problem's value."""

    def __str__(self) -> str:
        return "(encrypted)"


def marked(problem: Problem, places: Iterable[Place]) -> Problem:
    """The problem marked as a possible false alarm, each stand-in inside its value shown as
    (encrypted), not as if the user had written it."""
    value = copy.deepcopy(problem.value)
    found = parts(problem.path)
    for place in places:
        inner = tuple(str(p) for p in place)
        if not isinstance(value, (dict, list)):
            break
        if len(found) < len(inner) and inner[:len(found)] == found:
            rest: Place = place[len(found):]
        elif found[:-1] == inner[:-1] and isinstance(value, dict):
            rest = place[-1:]
        else:
            continue
        holder = _at(value, rest[:-1])
        if isinstance(holder, dict) and rest[-1] in holder:
            holder[rest[-1]] = _Encrypted()
        elif isinstance(holder, list) and isinstance(rest[-1], int) and rest[-1] < len(holder):
            holder[rest[-1]] = _Encrypted()
    return Problem(problem.path, value, f"{problem.allowed}; {FALSE_ALARM}")


def unjudged(settings: Settings | None, places: Iterable[Place]) -> list[Problem]:
    """Problems the check cannot judge at all: with the region encrypted, whether each zone is
    in it (infra/settings/rules.py zones_are_in_the_region, the one zone rule that reads the
    region)."""
    from infra.settings.rules import zones_are_in_the_region

    if settings is None or ("region",) not in set(places):
        return []
    return list(zones_are_in_the_region(settings))


def shown_place(place: Place) -> str:
    return f"{CONFIG_NAMESPACE}:{config_path(place)}"
