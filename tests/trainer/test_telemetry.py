"""Rank 0's metrics and TensorBoard files copied to the checkpoint bucket (--telemetry_dir), so a
laptop reads them: after a finished run, while a run goes on, and after a preempted one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import emulators
from tests.trainer.helpers import REPO, TINY, env, records, run_trainer, summary
from trainer.config import parse_config
from trainer.exit_codes import RESUME
from trainer.telemetry import TelemetryMirror


def _event_files(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in folder.rglob("*") if p.is_file()}


def test_a_finished_run_s_metrics_and_tensorboard_events_are_copied_whole(tmp_path):
    mirror = tmp_path / "bucket" / "telemetry"
    run_trainer(TINY + ["--max_steps", "12", "--log_every", "4", "--checkpoint_every", "6",
                        "--checkpoint_dir", str(tmp_path / "ckpt"),
                        "--metrics_file", str(tmp_path / "m.jsonl"),
                        "--tensorboard_dir", str(tmp_path / "tb"),
                        "--telemetry_dir", f"file://{mirror}",
                        # no periodic copy in so short a run: the checkpoints' and the exit's
                        "--telemetry_every_seconds", "3600"], nproc=2)
    assert (mirror / "metrics.jsonl").read_bytes() == (tmp_path / "m.jsonl").read_bytes()
    assert summary(mirror / "metrics.jsonl")["step"] == 12  # the exit copy holds the end
    local = _event_files(tmp_path / "tb")
    assert local and _event_files(mirror / "tensorboard") == local
    assert not list(mirror.rglob("*.part"))  # no half-written copy left


def test_only_changed_files_are_sent_and_a_line_being_written_waits(tmp_path):
    tb = tmp_path / "tb"
    tb.mkdir()
    (tb / "events.out.tfevents.1").write_bytes(b"\x00" * 64)
    metrics = tmp_path / "m.jsonl"
    metrics.write_text('{"event": "train", "step": 1}\n{"event": "tr')  # a line half written
    mirror = TelemetryMirror(str(tmp_path / "out"), str(metrics), str(tb), every_seconds=3600)
    assert mirror.sync() == 2
    assert (tmp_path / "out" / "metrics.jsonl").read_text() == '{"event": "train", "step": 1}\n'
    assert mirror.sync() == 0  # nothing changed: nothing sent
    with metrics.open("a") as fh:
        fh.write('ain", "step": 2}\n')
    assert mirror.sync() == 1  # only metrics.jsonl
    assert (tmp_path / "out" / "metrics.jsonl").read_bytes() == metrics.read_bytes()


def test_an_unreachable_store_never_stops_the_mirror_and_it_catches_up(tmp_path, caplog):
    metrics = tmp_path / "m.jsonl"
    metrics.write_text('{"event": "train", "step": 1}\n')
    blocker = tmp_path / "out"
    blocker.write_text("a file where the folder should be")  # every upload fails
    mirror = TelemetryMirror(str(blocker / "telemetry"), str(metrics), None, every_seconds=3600)
    assert mirror.sync() == 0 and "could not copy" in caplog.text
    blocker.unlink()
    assert mirror.sync() == 1
    assert (blocker / "telemetry" / "metrics.jsonl").read_bytes() == metrics.read_bytes()


def test_a_new_file_system_keeps_the_bucket_s_earlier_generations(tmp_path):
    """`pulumi destroy` then `up`: the checkpoints stay in the bucket, the shared file system is
    new and empty. The resumed run's metrics.jsonl starts with the earlier records, so its copy
    to the bucket holds both generations instead of overwriting the first."""
    mirror = tmp_path / "bucket" / "telemetry"
    metrics, tb = tmp_path / "fs" / "m.jsonl", tmp_path / "fs" / "tb"
    args = TINY + ["--log_every", "4", "--checkpoint_every", "6",
                   "--checkpoint_dir", str(tmp_path / "bucket" / "ckpt"),
                   "--metrics_file", str(metrics), "--tensorboard_dir", str(tb),
                   "--telemetry_dir", f"file://{mirror}", "--telemetry_every_seconds", "3600"]
    run_trainer(args + ["--max_steps", "12"])
    first = (mirror / "metrics.jsonl").read_bytes()
    first_events = _event_files(mirror / "tensorboard")
    assert summary(mirror / "metrics.jsonl")["step"] == 12
    for path in sorted((tmp_path / "fs").rglob("*"), reverse=True):  # a new file system
        path.rmdir() if path.is_dir() else path.unlink()

    run_trainer(args + ["--max_steps", "20"])
    copied = (mirror / "metrics.jsonl").read_bytes()
    assert copied.startswith(first) and copied == metrics.read_bytes()
    starts = [r for r in records(mirror / "metrics.jsonl") if r["event"] == "start"]
    assert [s["resumed_from"] for s in starts] == [None, 12]
    assert summary(mirror / "metrics.jsonl")["step"] == 20
    events = _event_files(mirror / "tensorboard")  # the first generation's events stay too
    assert first_events.items() <= events.items() and len(events) > len(first_events)


def test_a_bucket_unreadable_at_start_is_never_overwritten_and_the_next_start_merges(tmp_path,
                                                                                       caplog):
    """A store that failed the read at start: metrics.jsonl waits until a turn can compare;
    while the bucket holds records the local file lacks, it is left alone."""
    out = tmp_path / "out"
    remote = out / "metrics.jsonl"
    remote.mkdir(parents=True)  # reading it fails (IsADirectoryError): the store is unreadable
    metrics = tmp_path / "m.jsonl"
    first = TelemetryMirror(str(out), str(metrics), None, every_seconds=3600)
    first.seed()
    assert "could not read" in caplog.text and not metrics.exists()

    remote.rmdir()
    remote.write_text('{"event": "start", "step": 0}\n')  # the earlier generation's record
    metrics.write_text('{"event": "start", "step": 4}\n')  # this generation's, written since
    assert first.sync() == 0  # compared now: the bucket's record would be lost
    assert remote.read_text() == '{"event": "start", "step": 0}\n'
    assert "is not overwritten" in caplog.text

    second = TelemetryMirror(str(out), str(metrics), None, every_seconds=3600)  # next start
    second.seed()
    both = '{"event": "start", "step": 0}\n{"event": "start", "step": 4}\n'
    assert metrics.read_text() == both
    assert second.sync() == 1 and remote.read_text() == both
    third = TelemetryMirror(str(out), str(metrics), None, every_seconds=3600)
    third.seed()  # the local file already begins with the bucket's copy: left as it is
    assert metrics.read_text() == both


def test_a_bucket_unreadable_only_at_start_is_copied_once_it_is_seen_to_fit(tmp_path):
    out = tmp_path / "out"
    (out / "metrics.jsonl").mkdir(parents=True)
    metrics = tmp_path / "m.jsonl"
    mirror = TelemetryMirror(str(out), str(metrics), None, every_seconds=3600)
    mirror.seed()
    (out / "metrics.jsonl").rmdir()  # the store answers again: nothing there yet
    metrics.write_text('{"event": "start", "step": 0}\n')
    assert mirror.sync() == 1
    assert (out / "metrics.jsonl").read_bytes() == metrics.read_bytes()


RECORDS = [f'{{"event": "train", "step": {i}}}\n'.encode() for i in range(1, 6)]


@pytest.mark.parametrize("bucket, local, merged", [
    # A killed node lost its unflushed tail; the bucket already had it: each record once.
    (RECORDS[:4], RECORDS[:3], RECORDS[:4]),
    # ... and the last write was torn: the start of a record the bucket holds is not kept.
    (RECORDS[:4], [*RECORDS[:3], RECORDS[3][:9]], RECORDS[:4]),
    # ... and the local file has a record the bucket never got: it follows the bucket's.
    (RECORDS[:3], [*RECORDS[:2], RECORDS[3]], [*RECORDS[:3], RECORDS[3]]),
    # The local file only grew since the copy: left as it is.
    (RECORDS[:2], RECORDS[:5], RECORDS[:5]),
    # A new, empty shared file system: the bucket's history.
    (RECORDS[:3], [], RECORDS[:3]),
])
def test_the_merge_at_start_keeps_each_record_once(tmp_path, bucket, local, merged):
    out, metrics = tmp_path / "out", tmp_path / "m.jsonl"
    out.mkdir()
    (out / "metrics.jsonl").write_bytes(b"".join(bucket))
    if local:
        metrics.write_bytes(b"".join(local))
    mirror = TelemetryMirror(str(out), str(metrics), None, every_seconds=3600)
    mirror.seed()
    assert metrics.read_bytes() == b"".join(merged)
    mirror.sync()  # and the bucket's copy becomes that history, not a longer one
    assert (out / "metrics.jsonl").read_bytes() == b"".join(merged)


def test_a_store_that_hangs_at_start_holds_rank_0_one_bound_and_is_checked_later(tmp_path,
                                                                                  caplog):
    """Rank 0 reads the bucket before the fabric gate while the other ranks wait: a store that
    never answers (here a FIFO in a file:// store: reading it blocks until someone writes)
    costs one bound, and metrics.jsonl is copied only once a turn can compare."""
    out, metrics = tmp_path / "out", tmp_path / "m.jsonl"
    out.mkdir()
    os.mkfifo(out / "metrics.jsonl")
    mirror = TelemetryMirror(str(out), str(metrics), None, every_seconds=3600)
    started = time.monotonic()
    try:
        mirror.seed(timeout=0.5)
        took = time.monotonic() - started
    finally:
        with open(out / "metrics.jsonl", "wb") as fh:  # let the hung read end
            fh.write(RECORDS[0])
    assert took < 5, took
    assert "no answer in 0.5s" in caplog.text and not metrics.exists()
    time.sleep(0.2)  # the released read finishes on its own thread and changes nothing
    assert not metrics.exists()
    (out / "metrics.jsonl").unlink()
    (out / "metrics.jsonl").write_bytes(RECORDS[0])  # the store answers again
    metrics.write_bytes(RECORDS[1])  # this generation's record, written since
    assert mirror.sync() == 0  # the bucket holds a record the local file lacks: left alone
    assert (out / "metrics.jsonl").read_bytes() == RECORDS[0]


@pytest.mark.parametrize("flags, wrong", [
    (["--telemetry_dir", "ftp://host/x", "--metrics_file", "m.jsonl"], "URI scheme"),
    (["--telemetry_dir", "s3://bucket/telemetry"], "set at least one of them"),
    (["--telemetry_dir", "s3://b/t", "--metrics_file", "m", "--telemetry_every_seconds", "0"],
     "must be > 0"),
])
def test_telemetry_flags_that_cannot_work_are_refused_naming_the_flag(flags, wrong, capsys):
    with pytest.raises(SystemExit):
        parse_config(flags)
    err = capsys.readouterr().err
    assert wrong in err and "--telemetry_" in err


def _s3(server, bucket: str):
    import boto3

    s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=server.url,
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    s3.create_bucket(Bucket=bucket)
    return s3


def _objects(s3, bucket: str, prefix: str) -> dict:
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    return {o["Key"][len(prefix):]: s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
            for o in listed}


def test_s3_mirror_during_a_run_after_sigterm_and_after_the_resumed_end(tmp_path):
    """The pod's way: the launcher (torchrun's agent) gets SIGTERM and forwards it; rank 0
    copies before it exits RESUME. Its periodic copies arrive while the run goes on."""
    bucket, prefix = "ckpt", "dlrm/telemetry/"
    uri = f"s3://{bucket}/{prefix.rstrip('/')}"
    metrics, tb = tmp_path / "m.jsonl", tmp_path / "tb"
    for server in emulators.running(emulators.moto_s3()):
        s3 = _s3(server, bucket)
        pod_env = {k: v for k, v in env().items() if not k.startswith(("AWS_", "HOME"))}
        pod_env.update(server.env, AWS_REGION="us-east-1", HOME=str(tmp_path))
        args = TINY + ["--log_every", "5", "--checkpoint_dir", f"s3://{bucket}/dlrm",
                       "--metrics_file", str(metrics), "--tensorboard_dir", str(tb),
                       "--telemetry_dir", uri, "--telemetry_every_seconds", "0.5"]
        from tests.gang import free_port

        launcher = [sys.executable, "-m", "trainer.launch", "--nnodes=1", "--nproc_per_node=2",
                    "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{free_port()}",
                    "-m", "trainer", *args, "--max_steps", "100000"]
        proc = subprocess.Popen(launcher, cwd=REPO, env=pod_env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            # Periodic copies: the bucket sees training records while the run goes on.
            while b'"train"' not in _objects(s3, bucket, prefix).get("metrics.jsonl", b""):
                assert proc.poll() is None and time.monotonic() < deadline, \
                    proc.communicate()[0][-3000:]
                time.sleep(0.3)
            proc.send_signal(signal.SIGTERM)  # the kubelet's stop, to the container's PID 1
            output = proc.communicate(timeout=90)[0]
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        assert proc.returncode == RESUME, output[-3000:]
        copied = _objects(s3, bucket, prefix)
        assert summary(metrics)["preempted"] is True
        assert copied["metrics.jsonl"] == metrics.read_bytes()  # the exit copy: to the end
        local = {f"tensorboard/{k}": v for k, v in _event_files(tb).items()}
        assert local and {k: v for k, v in copied.items() if k.startswith("tensorboard/")} == local

        # The resumed generation appends to the same file; its end is copied too.
        stopped_at = summary(metrics)["step"]
        again = [f"--rdzv_endpoint=127.0.0.1:{free_port()}" if a.startswith("--rdzv_endpoint")
                 else a for a in launcher[:-2]]
        proc = subprocess.run(again + ["--max_steps", str(stopped_at + 5)], cwd=REPO,
                              env=pod_env, capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        copied = _objects(s3, bucket, prefix)
        assert copied["metrics.jsonl"] == metrics.read_bytes()
        assert [r["event"] for r in records(metrics)].count("start") == 2
        assert summary(metrics)["resumed_from"] is not None
