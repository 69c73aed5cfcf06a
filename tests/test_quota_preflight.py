"""`pulumi up` (the program under mocks) reads the account's quota for the job's pool before any
resource: a fresh account's zero P quota is refused with the numbers and the request command,
unless `quota.pending: true` says an increase is on its way."""

from __future__ import annotations

import pytest

from infra.settings.errors import SettingsError
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


# --- Azure: Compute usages per VM family (ARM Usage_List) -----------------------------------
from tests.fakes import azure as fake_azure  # noqa: E402
from tests.fakes import gcp as fake_gcp  # noqa: E402


def _no_cloud_resources(run) -> None:
    cloud = [r for r in run.resources if r.custom and not r.type.startswith("pulumi:providers:")]
    assert cloud == [], f"registered before the refusal: {[r.name for r in cloud]}"


@pytest.fixture
def warnings_logged(monkeypatch):
    import pulumi

    logged: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *a, **k: logged.append(message))
    return logged


@pytest.fixture
def zero_nd_family(monkeypatch):
    monkeypatch.setitem(fake_azure.COMPUTE_USAGES, "standardNDASv4_A100Family",
                        fake_azure.usage("standardNDASv4_A100Family", 0))


def test_azure_a_zero_nd_family_quota_is_refused_before_any_resource(zero_nd_family):
    run = run_stack("azure", expect_error=True)
    assert isinstance(run.error, SettingsError), run.error
    (problem,) = [p for p in run.error.problems if p.path == "job.nodes"]
    assert ("2 x Standard_ND96asr_v4 need 192 vCPUs of Azure standardNDASv4_A100Family vCPUs "
            "(eastus), which has 0 free (limit 0, used 0) < 192 vCPUs") in problem.allowed
    # the request command doctor prints too, for the subscription pulumi up runs as
    assert ("az quota update --resource-name standardNDASv4_A100Family --scope /subscriptions/"
            in problem.allowed and "--limit-object value=192 --resource-type dedicated"
            in problem.allowed)
    assert "quota.pending true" in problem.allowed
    assert any("/Microsoft.Compute/locations/eastus/usages?api-version=2024-07-01" in url
               for url in fake_azure.USAGE_REQUESTS)
    _no_cloud_resources(run)


def test_azure_quota_pending_goes_ahead_with_a_warning_and_spot_reads_low_priority_cores(
        zero_nd_family, warnings_logged, monkeypatch):
    run = run_stack("azure", overrides={"quota": {"pending": True}})
    assert run.error is None and run.resources
    assert any("quota.pending: true, so going ahead below the quota (2 x Standard_ND96asr_v4 "
               "need 192 vCPUs of Azure standardNDASv4_A100Family" in w for w in warnings_logged)
    # a spot job counts against lowPriorityCores (room there), not the zero family quota
    assert run_stack("azure", overrides={"job": {"pool": "spot"}}).error is None
    monkeypatch.setitem(fake_azure.COMPUTE_USAGES, "lowPriorityCores",
                        fake_azure.usage("lowPriorityCores", 100, 10))
    spot = run_stack("azure", overrides={"job": {"pool": "spot"}}, expect_error=True)
    (problem,) = spot.error.problems
    assert "Azure spot (low-priority) vCPUs (eastus), which has 90 free (limit 100, used 10) " \
           "< 192 vCPUs" in problem.allowed
    assert "--limit-object value=202 --resource-type lowPriority" in problem.allowed


# --- GCP: the region's GPU and CPU quotas (Compute Engine regions.get) ----------------------
@pytest.fixture
def zero_a100_quota(monkeypatch):
    monkeypatch.setitem(fake_gcp.REGION_QUOTAS, "NVIDIA_A100_GPUS",
                        fake_gcp.quota("NVIDIA_A100_GPUS", 0.0))


def test_gcp_a_zero_gpu_quota_is_refused_before_any_resource(zero_a100_quota):
    run = run_stack("gcp", expect_error=True)
    assert isinstance(run.error, SettingsError), run.error
    (problem,) = [p for p in run.error.problems if p.path == "job.nodes"]
    assert ("2 x a2-highgpu-8g need 16 GPUs of GCP NVIDIA_A100_GPUS (us-central1), which has 0 "
            "free (limit 0, used 0) < 16 GPUs; request: NVIDIA_A100_GPUS = 16 in us-central1 at "
            "https://console.cloud.google.com/iam-admin/quotas?project=torchrec-ci-01") \
        in problem.allowed
    assert fake_gcp.REGION_REQUESTS[-1][0] == ("https://compute.googleapis.com/compute/v1/"
                                              "projects/torchrec-ci-01/regions/us-central1")
    _no_cloud_resources(run)


def test_gcp_quota_pending_goes_ahead_with_a_warning_and_spot_reads_the_preemptible_quota(
        zero_a100_quota, warnings_logged, monkeypatch):
    run = run_stack("gcp", overrides={"quota": {"pending": True}})
    assert run.error is None and run.resources
    assert any("quota.pending: true" in w and "NVIDIA_A100_GPUS" in w for w in warnings_logged)
    assert run_stack("gcp", overrides={"job": {"pool": "spot"}}).error is None
    monkeypatch.setitem(fake_gcp.REGION_QUOTAS, "PREEMPTIBLE_NVIDIA_A100_GPUS",
                        fake_gcp.quota("PREEMPTIBLE_NVIDIA_A100_GPUS", 8.0))
    spot = run_stack("gcp", overrides={"job": {"pool": "spot"}}, expect_error=True)
    (problem,) = spot.error.problems
    assert "PREEMPTIBLE_NVIDIA_A100_GPUS (us-central1), which has 8 free (limit 8, used 0) < 16 " \
           "GPUs" in problem.allowed


def test_aws_quota_pending_warns_with_the_numbers(zero_p_quota, warnings_logged):
    run_stack("aws", overrides={"quota": {"pending": True}})
    assert any("quota.pending: true" in w and "L-417A185B in us-east-1), which is 0" in w
               for w in warnings_logged)


@pytest.mark.parametrize("stack", ["aws", "azure", "gcp"])
def test_check_says_pulumi_up_reads_the_quota_on_every_cloud(stack, tmp_path):
    from tests.test_check import check, write_stack

    out = check("--file", str(write_stack(tmp_path, stack))).stdout
    assert f"infra/{stack}/quotas.py" in out
    assert "`pulumi up` reads the quota the job's nodes count against before any resource" in out
    assert "does not read them" not in out


def test_a_p5_spot_job_is_judged_by_the_p5_spot_quota(monkeypatch):
    """P5 Spot is its own quota ("All P5 Spot Instance Requests", L-C4BD4855), apart from
    P4/P3/P2's (L-7212CCBC): a P4 spot quota to spare does not let a P5 spot gang through."""
    monkeypatch.setitem(fake_aws.SERVICE_QUOTAS, "L-C4BD4855", 0.0)
    monkeypatch.setitem(fake_aws.SERVICE_QUOTAS, "L-7212CCBC", 1536.0)
    run = run_stack("aws", overrides={"gpuPools": {"spot": {"machineType": "p5.48xlarge"}},
                                      "job": {"pool": "spot"}}, expect_error=True)
    assert isinstance(run.error, SettingsError), run.error
    (problem,) = [p for p in run.error.problems if p.path == "job.nodes"]
    assert "2 x p5.48xlarge need 384 vCPUs" in problem.allowed
    assert ('spot P5 quota "All P5 Spot Instance Requests" (L-C4BD4855 in us-east-1), which is 0'
            in problem.allowed), problem.allowed
    assert "--quota-code L-C4BD4855 --desired-value 384" in problem.allowed
    _no_cloud_resources(run)
