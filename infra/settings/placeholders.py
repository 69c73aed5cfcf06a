"""Values left as a template's placeholder are refused, each with what to put there and how.

A placeholder passes every shape rule (`my-gcp-project` is a well-formed project id) and fails
only when the cloud is asked, after `pulumi up` has started; so the shipped stack files carry
none (a value only the user knows is left unset, and its absence is named with the command that
sets it), and any that a copied or older stack file brings is named here.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from typing import Any

from infra.settings.errors import Problem
from infra.settings.model.stack_file import Settings

# Values earlier stack files and guides shipped (Pulumi.gcp.yaml carried `project:
# my-gcp-project  # replace with your project id`), by setting.
KNOWN_PLACEHOLDERS: dict[str, frozenset[str]] = {
    "gcp.project": frozenset({"my-gcp-project", "your-project-id", "project-id"}),
}
# Template markers in any text setting: <your-value>, changeme / replace-me, TODO, xxx, an
# RFC 2606 example domain.
PLACEHOLDER_TEXT = re.compile(
    r"<[^<>]*>|\b(change|replace)[-_ ]?(me|this)\b|^(todo|tbd|fixme|x{3,}|placeholder)$"
    r"|(^|[.@/])example\.(com|net|org)\b", re.IGNORECASE)
# What to put there and the command that sets it; other settings get the generic command.
HOW_TO_SET = {
    "gcp.project": "your GCP project id (`gcloud config get-value project` prints it): "
                   "pulumi config set --path gcp.project <project-id>",
}


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """(path, text) of every text value in the settings, lists named by their setting."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _strings(inner, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for inner in value:
            yield from _strings(inner, path)
    elif isinstance(value, str):
        yield path, value


def no_placeholders_left(s: Settings) -> Iterator[Problem]:
    named: set[str] = set()
    for path, text in _strings(s.model_dump(by_alias=True, mode="json"), ""):
        if path in named:
            continue
        if text in KNOWN_PLACEHOLDERS.get(path, ()) or PLACEHOLDER_TEXT.search(text):
            named.add(path)
            how = HOW_TO_SET.get(path, f"your own value: pulumi config set --path {shlex.quote(path)} <value>")
            yield Problem(path, text, f"a template's placeholder, not a real value; set {how}")
