"""Cross-cloud security policies, the whole program run under mocks per stack (issue 33)."""

from __future__ import annotations

import pytest

from tests.harness import STACKS, Run, run_stack


@pytest.fixture(scope="module", params=STACKS)
def run(request: pytest.FixtureRequest) -> Run:
    return run_stack(request.param)


def test_destroy_from_an_address_outside_api_access_cidrs_still_removes_the_cloud_resources(
        run: Run) -> None:
    """Every Kubernetes provider drops its objects from the state when the cluster cannot be
    reached (deleteUnreachable), so `pulumi destroy` goes on to delete the cluster and its GPU
    nodes instead of stopping at the first Kubernetes delete (pulumi/pulumi-kubernetes#2463,
    #2489). `destroy` runs with the provider inputs the last `up` stored."""
    providers = run.of_type("pulumi:providers:kubernetes")
    assert providers
    for provider in providers:
        assert provider.inputs.get("deleteUnreachable") in (True, "true"), provider.name
