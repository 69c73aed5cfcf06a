"""The stack's own earlier outputs (infra/previous_run.py): what lets a later run keep the
cluster's version and find the kept checkpoints again."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from infra import previous_run
from infra.previous_run import READ_STACK_OUTPUTS, PreviousRun, read_previous_run


class Answer:
    def __init__(self, value: Any) -> None:
        self.value = value


def test_the_program_reads_its_own_stack_by_its_full_name(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, dict[str, Any]]] = []

    def invoke(token: str, props: dict[str, Any], *_: Any, **__: Any) -> Answer:
        asked.append((token, props))
        return Answer({"name": props["name"], "outputs": {"kubernetes_version": "1.35.2"}})

    monkeypatch.setattr(pulumi.runtime, "invoke", invoke)
    monkeypatch.setattr(previous_run, "this_stack", lambda: "acme/torchrec-cloud/aws")
    found = read_previous_run()
    assert asked == [(READ_STACK_OUTPUTS, {"name": "acme/torchrec-cloud/aws"})]
    assert found.live and found.text("kubernetes_version") == "1.35.2"


def test_a_stack_without_outputs_is_a_first_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pulumi.runtime, "invoke", lambda *_a, **_k: Answer({"outputs": {}}))
    monkeypatch.setattr(previous_run, "this_stack", lambda: "o/p/s")
    assert read_previous_run() == PreviousRun() and not PreviousRun().live


def test_a_backend_that_cannot_answer_stops_the_run_before_anything_is_created(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Taken for a first run, a live stack would adopt its own checkpoint store as a kept one."""
    def invoke(*_: Any, **__: Any) -> Answer:
        raise RuntimeError("backend unreachable")

    monkeypatch.setattr(pulumi.runtime, "invoke", invoke)
    monkeypatch.setattr(previous_run, "this_stack", lambda: "o/p/s")
    with pytest.raises(pulumi.RunError) as caught:
        read_previous_run()
    assert "backend unreachable" in str(caught.value) and "Nothing was created" in str(caught.value)


def test_only_non_empty_strings_count_as_text() -> None:
    run = PreviousRun({"cluster_name": "c", "empty": "", "cost": {"usd": 1}})
    assert run.text("cluster_name") == "c"
    assert run.text("empty") is None and run.text("cost") is None and run.text("absent") is None
