"""What this stack's last completed `pulumi up` left: its outputs, read from the stack itself.

A later run must keep what a live cluster runs (its Kubernetes version) and must find again
what a destroy kept (the checkpoint store). Both start from the stack's own outputs, read with
the engine's built-in `pulumi:pulumi:readStackOutputs` invoke, the call behind a
StackReference (pulumi/pulumi pkg/resource/deploy/builtins.go). It answers synchronously,
before any resource is registered, so a decision that depends on it is made before anything
is created. A first run and a run after `pulumi destroy` both see no outputs: destroy deletes
the stack's root resource, and its outputs with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi

READ_STACK_OUTPUTS = "pulumi:pulumi:readStackOutputs"


@dataclass(frozen=True)
class PreviousRun:
    """The stack outputs of the last completed update (empty: first run, or after destroy)."""

    outputs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def live(self) -> bool:
        """True while the stack holds resources from an earlier `pulumi up`."""
        return bool(self.outputs)

    def text(self, name: str) -> str | None:
        """A string output, or None when the last run did not export it."""
        value = self.outputs.get(name)
        return value if isinstance(value, str) and value else None


def this_stack() -> str:
    """The fully qualified name of the stack being updated: <organization>/<project>/<stack>."""
    return f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"


def read_previous_run() -> PreviousRun:
    """This stack's outputs as its last update left them (a stack never updated has none).

    A backend that cannot answer stops the run: taken for a first run, a live stack would be
    judged by what the cloud offers today and would adopt its own checkpoint store as a kept
    one, so nothing is registered without the answer."""
    try:
        result = pulumi.runtime.invoke(READ_STACK_OUTPUTS, {"name": this_stack()}).value
    except Exception as error:  # noqa: BLE001 (the engine reports any backend error here)
        raise pulumi.RunError(
            f"could not read this stack's own outputs ({this_stack()}: {error}); the program "
            "needs them to keep the cluster's version and its checkpoint store. Nothing was "
            "created; check `pulumi stack output` works, then run again") from error
    return PreviousRun(dict((result or {}).get("outputs") or {}))
