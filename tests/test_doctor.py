"""`torchrec-cloud doctor`: tools, sign-in, this machine's address and the quotas each GPU pool's
maxNodes needs, with numbers from the clouds' quota APIs (recorded answers: AWS through the real
boto3 client and botocore's Stubber, which checks each request against the service's model;
Azure's and GCP's CLIs' JSON)."""

from __future__ import annotations

import json
from typing import Sequence

import boto3
from botocore.stub import Stubber

from tests.test_estimate import settings
from torchrec_cloud import doctor

HOME = "81.2.69.142"  # inside the harness's kubernetes.apiAccessCidrs


def runner(answers: dict[str, str], missing: Sequence[str] = ()):
    """A recorded command line: the answer of the first key the command starts with."""
    calls = []

    def run(command: Sequence[str]) -> tuple[int, str]:
        calls.append(" ".join(command))
        if command[0] in missing:
            return 127, ""
        for prefix, out in answers.items():
            if " ".join(command).startswith(prefix):
                return 0, out
        return 1, ""
    run.calls = calls  # type: ignore[attr-defined]
    return run


TOOLS = {"pulumi version": "v3.180.0\n", "docker buildx version": "github.com/docker/buildx v0.19.3\n",
         "kubectl version": "Client Version: v1.33.4\n"}


def quota_client(values: dict[str, float]):
    client = boto3.client("service-quotas", region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    stub = Stubber(client)
    for code, value in values.items():
        stub.add_response("get_service_quota",
                          {"Quota": {"ServiceCode": "ec2", "QuotaCode": code, "Value": value}},
                          {"ServiceCode": "ec2", "QuotaCode": code})
    stub.activate()
    return client


def test_aws_a_fresh_accounts_zero_p_quota_is_short_with_numbers_and_the_request_command():
    s = settings("aws")  # 2 x p4d.24xlarge (96 vCPUs) in each GPU pool at maxNodes
    run = runner({**TOOLS, "aws sts": json.dumps({"Account": "123456789012"})})
    lines, ready = doctor.report(s, "aws", run, lambda: HOME,
                                 lambda: quota_client({"L-417A185B": 0.0, "L-7212CCBC": 384.0}))
    text = "\n".join(lines)
    assert not ready
    assert "ok          Pulumi CLI: 3.180.0" in text
    assert "ok          AWS credentials: account 123456789012" in text
    assert f"ok          your address in kubernetes.apiAccessCidrs: {HOME}" in text
    assert ("short       EC2 on-demand P vCPUs (L-417A185B, us-east-1): 0 < 192 for gpu 2 x "
            "p4d.24xlarge (96 vCPUs)") in text
    assert ("aws service-quotas request-service-quota-increase --service-code ec2 --quota-code "
            "L-417A185B --desired-value 192 --region us-east-1") in text
    assert "ok          EC2 spot P4, P3 and P2 vCPUs (L-7212CCBC, us-east-1): 384 >= 192" in text
    assert text.endswith("1 to fix before `pulumi up --stack aws`")


def test_an_old_pulumi_a_missing_buildx_and_an_address_outside_the_cidrs_are_named_with_the_fix():
    s = settings("aws")
    run = runner({"pulumi version": "v3.150.2\n", "kubectl version": "v1.33", "aws sts": "{}"},
                 missing=["docker"])
    lines, _ = doctor.report(s, "aws", run, lambda: "192.0.2.10",
                             lambda: quota_client({"L-417A185B": 192.0, "L-7212CCBC": 192.0}))
    text = "\n".join(lines)
    assert "missing     Pulumi CLI: 3.150.2 is older than 3.174.0" in text
    assert "missing     Docker buildx" in text
    assert ("192.0.2.10 is outside 81.2.69.142/32: pulumi config set --stack aws --path "
            "'kubernetes.apiAccessCidrs[1]' 192.0.2.10/32") in text
    lines, _ = doctor.report(s, "aws", run, lambda: None, lambda: quota_client({}))
    assert any("not checked your address" in line for line in lines)  # never "ok" unread


def test_azure_family_quota_from_the_sizes_sku_and_its_usage():
    s = settings("azure")
    pool = s.gpu_pools.on_demand
    usage = [{"name": {"value": "standardNDASv4_A100Family"}, "currentValue": 0, "limit": 0},
             {"name": {"value": "lowPriorityCores"}, "currentValue": 0, "limit": 500}]
    skus = [{"name": pool.machine_type, "family": "standardNDASv4_A100Family"}]
    run = runner({**TOOLS, "az account show": json.dumps({"id": "0000-sub"}),
                  "kubelogin --version": "v0.2.8", "az vm list-usage": json.dumps(usage),
                  "az vm list-skus": json.dumps(skus)})
    lines, ready = doctor.report(s, "azure", run, lambda: HOME, lambda: None)
    text = "\n".join(lines)
    assert not ready
    need = pool.max_nodes * 96
    assert f"short       Azure standardNDASv4_A100Family vCPUs ({s.region})" in text
    assert f"0 free (limit 0, used 0) < {need} vCPUs; request: az quota update --resource-name " \
           f"standardNDASv4_A100Family --scope /subscriptions/0000-sub/providers/" \
           f"Microsoft.Compute/locations/{s.region} --limit-object value={need}" in text
    assert "ok          Azure spot (low-priority) vCPUs" in text


def test_gcp_regional_gpu_and_family_cpu_quotas():
    s = settings("gcp")
    region = {"quotas": [{"metric": "NVIDIA_A100_80GB_GPUS", "limit": 8.0, "usage": 0.0},
                         {"metric": "PREEMPTIBLE_NVIDIA_A100_80GB_GPUS", "limit": 0.0, "usage": 0.0},
                         {"metric": "NVIDIA_A100_GPUS", "limit": 8.0, "usage": 0.0},
                         {"metric": "PREEMPTIBLE_NVIDIA_A100_GPUS", "limit": 0.0, "usage": 0.0},
                         {"metric": "A2_CPUS", "limit": 1000.0, "usage": 0.0},
                         {"metric": "CPUS", "limit": 24.0, "usage": 0.0}]}
    run = runner({**TOOLS, "gcloud auth list": "me@example.com\n",
                  "gcloud compute regions describe": json.dumps(region)})
    lines, ready = doctor.report(s, "gcp", run, lambda: HOME, lambda: None)
    text = "\n".join(lines)
    assert not ready
    assert "short       GCP PREEMPTIBLE_NVIDIA_A100" in text
    assert "0 free (limit 0, used 0) < 16 GPUs; request: PREEMPTIBLE_NVIDIA_A100_GPUS = 16 in " \
        f"{s.region} at https://console.cloud.google.com/iam-admin/quotas" in text
    assert "console.cloud.google.com/iam-admin/quotas" in text
    assert "ok          GCP A2_CPUS" in text


def test_aws_a_p5_spot_pool_reads_the_p5_spot_quota_not_the_p4_p3_p2_one():
    """P5 Spot is its own quota ("All P5 Spot Instance Requests", infra/quotas.py EC2_QUOTAS),
    not P4/P3/P2's; on demand, every P generation counts against "Running On-Demand P
    instances"."""
    s = settings("aws", gpuPools={
        "onDemand": {"machineType": "p4d.24xlarge", "minNodes": 0, "maxNodes": 2},
        "spot": {"machineType": "p5.48xlarge", "minNodes": 0, "maxNodes": 2}})
    run = runner({**TOOLS, "aws sts": json.dumps({"Account": "123456789012"})})
    lines, _ = doctor.report(s, "aws", run, lambda: HOME,
                             lambda: quota_client({"L-417A185B": 384.0, "L-C4BD4855": 384.0}))
    text = "\n".join(lines)
    assert "ok          EC2 spot P5 vCPUs (L-C4BD4855, us-east-1): 384 >= 384" in text, text
    assert "L-7212CCBC" not in text
    assert "ok          EC2 on-demand P vCPUs (L-417A185B, us-east-1): 384 >= 192" in text


def test_gcp_sign_in_is_an_account_line_and_pulumis_credentials_are_checked_too():
    """New-user review B2: with nobody signed in, gcloud's stderr warning was read as the account
    ("ok gcloud sign-in: WARNING: ..."); Pulumi signs in with application-default credentials,
    which were never asked about."""
    s = settings("gcp")
    warning = "WARNING: The following filter keys were not present in any resource : status\n"
    nobody = runner({**TOOLS, "gcloud auth list": warning})
    lines, ready = doctor.report(s, "gcp", nobody, lambda: HOME, lambda: None)
    text = "\n".join(lines)
    assert not ready and "ok          gcloud sign-in" not in text
    assert "gcloud auth login && gcloud auth application-default login" in text
    signed_in = runner({**TOOLS, "gcloud auth list": "me@example.com\n"})
    text = "\n".join(doctor.report(s, "gcp", signed_in, lambda: HOME, lambda: None)[0])
    assert "ok          gcloud sign-in" in text and "me@example.com" in text
    # gcloud's own account alone is not enough: the application-default token is missing.
    assert "gcloud auth application-default login (Pulumi signs in with these)" in text
    both = runner({**TOOLS, "gcloud auth list": "me@example.com\n",
                   "gcloud auth application-default print-access-token": "ya29.token\n"})
    text = "\n".join(doctor.report(s, "gcp", both, lambda: HOME, lambda: None)[0])
    assert "ok          gcloud application-default credentials" in text
