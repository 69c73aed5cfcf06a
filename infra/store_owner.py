"""Which stack a kept checkpoint store belongs to: a tag (label on GCP) every store carries, read
before a kept store is adopted.

A store kept by `pulumi destroy` is found again by name (each cloud's storage.py). A name alone
cannot prove the store is this stack's: before names carried a hash, `production-a` and
`production-b` cut to the same 24 characters and shared one store, and the second stack's
`destroy` with `retainOnDestroy: false` deleted the first one's checkpoints. So every store is
tagged with its stack, and one tagged for another stack is refused before any resource exists,
naming both stacks. A store with no such tag was made before the tag existed: it is adopted
only under a name that was never cut (a name that could not be another stack's).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import pulumi

OWNER_KEY = "torchrec-cloud-stack"
# GCP label values: at most 63 lowercase letters, digits, '_' and '-'
# (https://cloud.google.com/resource-manager/docs/labels-overview#requirements).
LABEL_VALUE_MAX = 63


class StoreOwnedElsewhere(pulumi.RunError):
    """A kept store of this stack's name is tagged for another stack."""


def owner_value(project: str | None = None, stack: str | None = None, *, label: bool = False) -> str:
    """'<project>/<stack>' (AWS and Azure tag values); as a GCP label value when `label`."""
    value = f"{project or pulumi.get_project()}/{stack or pulumi.get_stack()}"
    if not label:
        return value
    return re.sub(r"[^a-z0-9_-]", "_", value.lower())[:LABEL_VALUE_MAX]


def owner_tags(*, label: bool = False) -> dict[str, str]:
    """The tag (or label) every checkpoint store of this stack carries."""
    return {OWNER_KEY: owner_value(label=label)}


def check_owner(store: str, tags: Mapping[str, str] | None, *, label: bool = False,
                name_was_cut: bool = False) -> None:
    """Nothing when the kept `store` may be adopted by this stack; StoreOwnedElsewhere when its
    owner tag names another stack, or when it has none and its name was cut (then it may be
    another stack's whose name starts the same)."""
    ours = owner_value(label=label)
    owner = (tags or {}).get(OWNER_KEY)
    if owner == ours or (owner is None and not name_was_cut):
        return
    whose = (f"is tagged {OWNER_KEY}={owner}: stack {owner} owns it" if owner is not None else
             f"has no {OWNER_KEY} tag and its name was cut to fit, so it may be another stack's")
    raise StoreOwnedElsewhere(
        f"the kept checkpoint store {store} {whose}; this stack is {ours}. Adopting it would let "
        f"this stack's jobs overwrite those checkpoints and its `pulumi destroy` delete them. "
        "Nothing was created. Use another stack name, or, if the store is this stack's, tag it "
        f"{OWNER_KEY}={ours} (docs/checkpoints.md, \"Whose store is it\") and run again")
