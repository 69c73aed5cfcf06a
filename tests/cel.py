"""A ValidatingAdmissionPolicy judged as the API server judges it, with a CEL evaluator
(cel-python): the policy's variables first, then each validation; the messages of those that
fail (empty: admitted). Shared by the node-gate and pod-security policy tests."""

from __future__ import annotations

from typing import Any

import celpy


def refusals(spec: dict[str, Any], new: dict[str, Any],
             old: dict[str, Any] | None = None) -> list[str]:
    env = celpy.Environment()
    activation: dict[str, Any] = {"object": celpy.json_to_cel(new)}
    if old is not None:
        activation["oldObject"] = celpy.json_to_cel(old)
    for variable in spec.get("variables", []):
        value = env.program(env.compile(variable["expression"])).evaluate(activation)
        activation["variables"] = celpy.celtypes.MapType({
            celpy.celtypes.StringType(variable["name"]): value})
    failed = []
    for rule in spec["validations"]:
        result = env.program(env.compile(rule["expression"])).evaluate(activation)
        if result is not True and result != celpy.celtypes.BoolType(True):
            failed.append(rule["message"])
    return failed
