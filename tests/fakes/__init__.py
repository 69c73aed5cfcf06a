"""Realistic outputs for mocked resources and invokes, one module per cloud.

Mocks return only what they are told: an output the program reads but the fake does not return
resolves to None and whatever used it silently disappears. Each cloud module exports
`OUTPUTS` (resource type -> function of the mock args returning extra outputs) and `CALLS`
(invoke token -> function returning the result).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi

from tests.fakes import aws, azure, common, gcp

OutputFn = Callable[[pulumi.runtime.MockResourceArgs], dict[str, Any]]
CallFn = Callable[[pulumi.runtime.MockCallArgs], dict[str, Any]]

OUTPUTS: dict[str, OutputFn] = {**common.OUTPUTS, **aws.OUTPUTS, **azure.OUTPUTS, **gcp.OUTPUTS}
CALLS: dict[str, CallFn] = {**common.CALLS, **aws.CALLS, **azure.CALLS, **gcp.CALLS}


def fake_outputs(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    """Extra outputs for a resource type (inputs are echoed by the harness already)."""
    make = OUTPUTS.get(args.typ)
    return make(args) if make else {}


def fake_call(args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
    """The result of an invoke; an unknown invoke fails loudly so a fake gets written for it."""
    make = CALLS.get(args.token)
    if make is None:
        raise NotImplementedError(f"no fake for invoke {args.token}; add one in tests/fakes/")
    return make(args)
