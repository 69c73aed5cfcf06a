"""A bucket key never lands outside the folder a laptop command copies into (issue 33 item 1).

The bucket is writable from the trainer's pod, so its keys are hostile input: these tests put
hostile keys in an emulated S3 bucket (moto server) and run the copy `tensorboard` makes.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import emulators
from torchrec_cloud.local_copy import UnsafeKey, local_path
from torchrec_cloud.stack import Outputs, open_bucket
from torchrec_cloud.tensorboard import sync_stack

HOSTILE_KEYS = (
    "../../../../../escaped.txt",  # the reproduced traversal: five levels up
    "run/../../escaped-too.txt",
    "/etc-escaped.txt",  # '//' after the prefix: an absolute path once the prefix is cut
    "..\\..\\escaped-backslash.txt",
    "C:/escaped-drive.txt",
    "./dot.txt",
    "run//double.txt",
)


@pytest.mark.parametrize("key", HOSTILE_KEYS)
def test_a_hostile_key_is_refused_by_the_one_mapping_every_copy_uses(tmp_path, key):
    with pytest.raises(UnsafeKey, match="not copied"):
        local_path(tmp_path / "target", key)


def test_a_symbolic_link_in_the_target_cannot_carry_a_copy_outside(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    (target / "run").symlink_to(tmp_path)  # left there by anything: the copy must not follow it
    with pytest.raises(UnsafeKey, match="outside"):
        local_path(target, "run/events.out")
    (target / "leaf").symlink_to(tmp_path / "elsewhere.txt")
    with pytest.raises(UnsafeKey, match="outside"):
        local_path(target, "leaf")
    assert local_path(target, "run2/events.out") == target / "run2" / "events.out"


def test_tensorboard_copies_the_event_files_and_refuses_keys_that_leave_its_folder(
        tmp_path, monkeypatch, capsys):
    import boto3

    bucket = "ckpt"
    prefix = "dlrm/telemetry/tensorboard"
    for server in emulators.running(emulators.moto_s3()):
        emulators.apply_env(monkeypatch, {**server.env, "AWS_REGION": "us-east-1"})
        s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=server.url,
                          aws_access_key_id="testing", aws_secret_access_key="testing")
        s3.create_bucket(Bucket=bucket)
        s3.put_object(Bucket=bucket, Key=f"{prefix}/run/events.out.tfevents.1", Body=b"good")
        for key in HOSTILE_KEYS:
            s3.put_object(Bucket=bucket, Key=f"{prefix}/{key}", Body=b"hostile")
        listed = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]}
        assert f"{prefix}/../../../../../escaped.txt" in listed  # S3 keeps the key as written
        out = tmp_path / "a" / "b" / "c" / "d" / "out"
        outputs = Outputs(stack="aws", cloud="aws", cluster_name="c", kubeconfig="{}",
                          checkpoint_uri=f"s3://{bucket}/dlrm", job_name="dlrm",
                          job_namespace="torchrec")
        target, copied = sync_stack(outputs, out, opener=lambda uri: open_bucket(uri, outputs))
    assert copied == ["run/events.out.tfevents.1"]
    assert (target / "run" / "events.out.tfevents.1").read_bytes() == b"good"
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == [str(Path("a/b/c/d/out/aws/run/events.out.tfevents.1"))], written
    errors = capsys.readouterr().err
    assert errors.count("tensorboard: refused") == len(HOSTILE_KEYS), errors
    assert "escaped.txt" in errors and not os.path.exists(tmp_path / "escaped.txt")


def test_one_key_the_laptop_cannot_hold_does_not_stop_the_other_copies(tmp_path) -> None:
    """A key with a 300-character segment (ENAMETOOLONG here) is reported and skipped: anything
    in a trainer pod could otherwise blank the laptop's TensorBoard."""
    import fsspec

    from torchrec_cloud.tensorboard import sync

    fs = fsspec.filesystem("memory")
    root = "/bucket/run/tensorboard"
    for key, data in ((f"{root}/{'x' * 300}", b"1"), (f"{root}/events.out.tfevents.1", b"events")):
        fs.pipe_file(key, data)
    target = tmp_path / "tb"
    target.mkdir()
    copied = sync(fs, root, target)
    assert "events.out.tfevents.1" in copied
    assert (target / "events.out.tfevents.1").read_bytes() == b"events"
    assert f"{'x' * 300}" not in copied
    assert not list(target.rglob("*.partial"))


@pytest.mark.parametrize("stack", ["../../escaped", "/tmp/abs", "org/proj/aws", ".."])
def test_status_writes_its_report_inside_out_whatever_the_stack_is_called(tmp_path, stack):
    """`status --out DIR --stack S` keeps its PNG and summary in DIR/<one folder> (security
    review D3: `--stack ../../x` with `--outputs` wrote two levels above DIR)."""
    from torchrec_cloud.status import report_dir

    folder = report_dir(str(tmp_path), stack)
    assert folder.parent == tmp_path and folder.name not in ("", ".", "..")
