"""The words a new user meets for the mistakes of issue 31's walkthrough: each names the
setting and gives a command that works as printed."""

from __future__ import annotations

from typing import Any

import pytest

from infra.settings.errors import use_stack
from infra.settings.loader import settings_and_problems
from tests.test_estimate import values


def problems(stack: str, **sections: Any) -> dict[str, str]:
    use_stack(stack)
    raw = values(stack, **{k: v for k, v in sections.items() if isinstance(v, dict)})
    raw.update({k: v for k, v in sections.items() if not isinstance(v, dict)})
    try:
        _, found = settings_and_problems(raw)
    finally:
        use_stack(None)
    return {p.path: str(p) for p in found}


def test_zones_typed_as_text_get_item_commands_without_brackets():
    found = problems("aws", zones="[eu-west-1a, eu-west-1b]")
    assert "--path 'zones[0]' eu-west-1a`" in found["zones"]
    assert "--path 'zones[1]' eu-west-1b`" in found["zones"]
    assert "'[eu-west-1a" not in found["zones"].split("text given", 1)[1]  # only the value shown


def test_a_flag_of_another_program_is_not_taken_for_a_typo_of_ours():
    found = problems("aws", job={"trainerArgs": {"shuffle_batches": True}})
    message = found["job.trainerArgs.shuffle_batches"]
    assert "not a trainer flag" in message and "did you mean" not in message
    typo = problems("aws", job={"trainerArgs": {"learning_rat": 0.1}})["job.trainerArgs.learning_rat"]
    assert "did you mean 'learning_rate'" in typo  # a real typo still gets its fix


def test_more_nodes_than_maxnodes_gets_both_commands():
    message = problems("aws", job={"nodes": 64})["job.nodes"]
    assert "`pulumi config set --path job.nodes 2`" in message
    assert "`pulumi config set --path gpuPools.onDemand.maxNodes 64`" in message
    assert "`torchrec-cloud doctor`" in message  # the stack is named where it is shown


def test_the_doctor_command_in_a_message_names_the_stack():
    from infra.settings.errors import for_stack, use_stack

    use_stack("aws")
    try:
        assert for_stack("(quota: `torchrec-cloud doctor`)") == "(quota: `torchrec-cloud doctor --stack aws`)"
    finally:
        use_stack(None)


def test_recipe_mlperf_beside_batch_size_gets_the_remove_command():
    message = problems("aws", job={"trainerArgs": {"recipe": "mlperf", "batch_size": 2048}})[
        "job.trainerArgs.batch_size"]
    assert "`pulumi config rm --path job.trainerArgs.batch_size`" in message


def test_fewer_processes_than_gpus_is_refused_as_idle_gpus_paid_for():
    message = problems("aws", job={"processesPerNode": 4})["job.processesPerNode"]
    assert "4 GPUs would idle" in message
    assert "`pulumi config set --path job.processesPerNode 8`" in message


@pytest.mark.parametrize(("cap", "refused"), [(1.0, True), (-1, False), (100.0, False)])
def test_an_azure_spot_cap_below_the_list_price_is_refused(cap: float, refused: bool):
    found = problems("azure", gpuPools={"spot": {"maxPrice": cap}})
    assert ("gpuPools.spot.maxPrice" in found) == refused
    if refused:
        assert "spot list price" in found["gpuPools.spot.maxPrice"]
        # `-1` after `--`: the Pulumi CLI reads a bare -1 as a flag (pulumi/pulumi#892)
        assert "--path gpuPools.spot.maxPrice -- -1`" in found["gpuPools.spot.maxPrice"]
