"""Checkpoints on each stack's object store, with the environment the stack's contract gives the
trainer pod, pointed at an emulator the test starts (tests/emulators.py). The emulators accept a
fixed test credential, not the pod's workload identity: see tests/emulators.py for what that
leaves untested, and ObjectUserProxy for the one GCS IAM rule reproduced here."""

from __future__ import annotations

import os
from typing import Dict, Tuple

import pytest
import torch
import torch.distributed as dist

from tests import emulators
from tests.trainer.helpers import REPO, summary, train_until
from trainer.checkpoint import Checkpointer

# Credentials and endpoints a developer's shell may hold: the pod has none of them.
HOST_VARIABLES = ("AWS_", "AZURE_", "GOOGLE_", "STORAGE_EMULATOR_HOST", "GCSFS_", "CLOUDSDK_")


def contract_env(stack: str) -> Tuple[Dict[str, str], str]:
    """The trainer container's environment and the checkpoint URI, from the stack run under
    mocks as `pulumi up` would run it."""
    from tests.harness import run_stack

    run = run_stack(stack)
    trainers = [c for r in run.resources if r.type.startswith("kubernetes:")
                for c in _containers(r.inputs) if "trainer" in " ".join(map(str, c.get("command", []) + c.get("args", [])))]
    assert trainers, f"{stack}: no trainer container in the program's Kubernetes objects"
    env = {e["name"]: str(e["value"]) for e in trainers[0].get("env") or [] if "value" in e}
    return env, run.outputs["checkpoint_uri"]


def _containers(tree):
    """Every container spec in a Kubernetes object (Job, JobSet, PyTorchJob ...)."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            if key == "containers" and isinstance(value, list):
                yield from (c for c in value if isinstance(c, dict))
            else:
                yield from _containers(value)
    elif isinstance(tree, list):
        for item in tree:
            yield from _containers(item)


def pod_environment(monkeypatch, pod_env: Dict[str, str], emulator_env: Dict[str, str]) -> Dict[str, str]:
    for key in list(os.environ):
        if key.startswith(HOST_VARIABLES):
            monkeypatch.delenv(key)
    env = {**pod_env, **emulator_env}
    emulators.apply_env(monkeypatch, env)
    return env


@pytest.fixture
def world_of_one(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def _state(step: int) -> dict:
    return {"model": {"emb": torch.arange(4000.0).reshape(100, 40) + step, "mlp.bias": torch.full((8,), step / 2)},
            "optim": {"state": {"emb.momentum": torch.full((100,), float(step))}},
            "progress": torch.tensor([step, 0, step, 1])}


def _save_and_resume(uri: str) -> None:
    writer = Checkpointer(uri, keep=2)
    for step in (10, 20, 30):
        assert writer.save(step, _state(step))
    writer.close()
    reader = Checkpointer(uri, keep=2)  # a restarted pod: a new process, a new client
    assert reader.complete_steps() == [20, 30] and reader.latest() == 30
    state = {"model": {"emb": torch.zeros(100, 40), "mlp.bias": torch.zeros(8)},
             "optim": {"state": {"emb.momentum": torch.zeros(100)}}, "progress": torch.zeros(4, dtype=torch.int64)}
    reader.load(30, state)
    expected = _state(30)
    assert torch.equal(state["model"]["emb"], expected["model"]["emb"])
    assert torch.equal(state["optim"]["state"]["emb.momentum"], expected["optim"]["state"]["emb.momentum"])
    assert state["progress"].tolist() == [30, 0, 30, 1]


def _bucket(uri: str) -> str:
    return uri.split("://", 1)[1].split("/", 1)[0]


def test_aws_s3_checkpoints_save_and_resume_with_the_pod_environment(world_of_one, monkeypatch):
    pod_env, uri = contract_env("aws")
    assert uri.startswith("s3://") and "AWS_REGION" in pod_env
    for server in emulators.running(emulators.moto_s3()):
        pod_environment(monkeypatch, pod_env, server.env)
        import boto3

        region = pod_env["AWS_REGION"]
        s3 = boto3.client("s3", region_name=region, endpoint_url=server.url)
        extra = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
        s3.create_bucket(Bucket=_bucket(uri), **extra)  # the stack creates it
        _save_and_resume(uri)
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=_bucket(uri))["Contents"]]
        assert any(k.endswith("step-30/.metadata") for k in keys)


def test_azure_blob_checkpoints_save_and_resume_with_the_pod_environment(world_of_one, monkeypatch):
    pod_env, uri = contract_env("azure")
    assert uri.startswith("az://") and pod_env.get("AZURE_STORAGE_ACCOUNT_NAME")
    for server in emulators.running(emulators.azurite()):
        pod_environment(monkeypatch, pod_env, server.env)
        from azure.storage.blob import BlobServiceClient

        service = BlobServiceClient.from_connection_string(server.env["AZURE_STORAGE_CONNECTION_STRING"])
        service.create_container(_bucket(uri))  # the stack creates it
        _save_and_resume(uri)
        names = [b.name for b in service.get_container_client(_bucket(uri)).list_blobs()]
        assert any(n.endswith("step-30/.metadata") for n in names)


def test_adlfs_is_never_anonymous_even_if_the_image_says_so(monkeypatch):
    # With only the contract's account name (no key, no connection string), the trainer must
    # authenticate with DefaultAzureCredential (workload identity), not anonymously.
    from trainer.checkpoint import open_store

    for key in list(os.environ):
        if key.startswith(HOST_VARIABLES):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", "ckptaccount")
    monkeypatch.setenv("AZURE_STORAGE_ANON", "true")
    fs, root = open_store("az://checkpoints/dlrm")
    assert fs.anon is False and type(fs.credential).__name__ == "DefaultAzureCredential"
    assert root == "checkpoints/dlrm"


def test_gcp_gcs_checkpoints_first_save_works_without_storage_buckets_get(world_of_one, monkeypatch):
    pod_env, uri = contract_env("gcp")
    assert uri.startswith("gs://")
    for server in emulators.running(emulators.gcs(_bucket(uri))):
        proxy = emulators.ObjectUserProxy(server.port)  # refuses bucket-level calls (IAM)
        try:
            pod_environment(monkeypatch, pod_env,
                            emulators.gcs_client_env(f"http://127.0.0.1:{proxy.port}"))
            # Why gcsfs 2026.x's default class (ExtendedGcsFileSystem) fails the first save:
            # its makedirs asks whether the bucket exists; the bucket GET is refused, the
            # fallback lists the (still empty) bucket, and the answer is "no such bucket".
            from gcsfs.core import GCSFileSystem

            assert not GCSFileSystem(skip_instance_cache=True).exists(_bucket(uri))
            assert proxy.refused  # the bucket GET was refused, as for roles/storage.objectUser
            _save_and_resume(uri)  # the trainer's store: object calls only
        finally:
            proxy.stop()


def test_trainer_resumes_from_s3_in_a_real_run_with_the_pod_environment(tmp_path):
    pod_env, uri = contract_env("aws")
    for server in emulators.running(emulators.moto_s3()):
        import boto3

        region = pod_env["AWS_REGION"]
        s3 = boto3.client("s3", region_name=region, endpoint_url=server.url,
                          aws_access_key_id="testing", aws_secret_access_key="testing")
        extra = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
        s3.create_bucket(Bucket=_bucket(uri), **extra)
        env = {k: v for k, v in os.environ.items() if not k.startswith(HOST_VARIABLES)}
        env.update(pod_env)
        env.update(server.env)
        env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(REPO), HOME=str(tmp_path))
        metrics = tmp_path / "m.jsonl"
        for step in (4, 6):
            train_until(step, uri, env, metrics, timeout=120)
        final = summary(metrics)
        assert final["resumed_from"] == 4 and final["step"] == 6
