"""`pulumi up` (the program under mocks) reads the account's quota for the job's pool before any
resource: a fresh account's zero P quota is refused with the numbers and the request command,
unless `quota.pending: true` says an increase is on its way."""

from __future__ import annotations

import pytest

from infra.settings import SettingsError
from tests.fakes import aws as fake_aws
from tests.harness import run_stack


@pytest.fixture
def zero_p_quota(monkeypatch):
    monkeypatch.setitem(fake_aws.SERVICE_QUOTAS, "L-417A185B", 0.0)  # on-demand P vCPUs


def test_a_zero_on_demand_p_quota_is_refused_before_any_resource(zero_p_quota):
    run = run_stack("aws", expect_error=True)
    assert isinstance(run.error, SettingsError), run.error
    (problem,) = [p for p in run.error.problems if p.path == "job.nodes"]
    assert "2 x p4d.24xlarge need 192 vCPUs" in problem.allowed
    assert "(L-417A185B in us-east-1), which is 0" in problem.allowed
    assert ("aws service-quotas request-service-quota-increase --service-code ec2 --quota-code "
            "L-417A185B --desired-value 192 --region us-east-1") in problem.allowed
    # Only components and providers, which create nothing in the cloud.
    cloud = [r for r in run.resources if r.custom and not r.type.startswith("pulumi:providers:")]
    assert cloud == [], f"registered before the refusal: {[r.name for r in cloud]}"


def test_quota_pending_lets_the_stack_go_ahead_and_a_spot_job_reads_the_spot_quota(zero_p_quota):
    run = run_stack("aws", overrides={"quota": {"pending": True}})
    assert run.error is None and run.resources
    # a spot job needs the spot quota (L-7212CCBC), which is there: the on-demand zero is not its
    spot = run_stack("aws", overrides={"job": {"pool": "spot"}})
    assert spot.error is None
