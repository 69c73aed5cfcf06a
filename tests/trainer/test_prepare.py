"""``python -m trainer.prepare`` on tiny files in Criteo's public TSV format: the same arrays as
torchrec's own preprocessing, MLPerf's multi-hot layout, reruns that skip finished days and
redo cut-short ones, a source in an S3 bucket (moto), and bad flags refused with exit 2."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from types import SimpleNamespace

import numpy as np
import pytest
from torchrec.datasets.criteo import BinaryCriteoUtils

from tests import emulators
from tests.trainer.helpers import REPO, env
from trainer.data.criteo import discover, open_npz_members
from trainer.prepare import multi_hot, source, write
from trainer.prepare.__main__ import main
from trainer.prepare.cli import parse
from trainer.prepare.run import prepare
from trainer.prepare.sample import sample_lines, write_sample
from trainer.recipe import MLPERF_TABLE_SIZES

ROWS = 600
MLPERF_SIZES = [3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1]
# MLPerf's num_embeddings_per_feature (trainer/recipe.py), its 40M tables at a 200-row cap
MLPERF_TABLES = [200 if n == 40_000_000 else n for n in MLPERF_TABLE_SIZES]


def run_prepare(src, out, *flags, capsys=None):
    layout = prepare(parse(["--source", str(src), "--output", str(out), *map(str, flags)]))
    return layout, (capsys.readouterr().out if capsys else "")


@pytest.fixture
def raw(tmp_path, monkeypatch):
    """Three sample days, streamed in several blocks each (as a 50 GB day would be)."""
    monkeypatch.setattr(source, "BLOCK_BYTES", 16 << 10)
    write_sample(str(tmp_path / "raw"), days=3, rows=ROWS)
    return tmp_path / "raw"


def test_days_equal_torchrecs_tsv_to_npys_then_sparse_to_contiguous(raw, tmp_path):
    layout, _ = run_prepare(raw, tmp_path / "out", "--frequency_threshold", 3)
    ref = tmp_path / "torchrec"
    ref.mkdir()
    for day in range(3):
        BinaryCriteoUtils.tsv_to_npys(str(raw / f"day_{day}"), *(str(ref / f"day_{day}_{p}.npy")
                                                                for p in ("dense", "sparse", "labels")))
    BinaryCriteoUtils.sparse_to_contiguous([str(ref / f"day_{d}_sparse.npy") for d in range(3)], str(ref),
                                           frequency_threshold=3)
    out = tmp_path / "out"
    for day in range(3):
        dense = np.load(out / f"day_{day}_dense.npy")
        labels = np.load(out / f"day_{day}_labels.npy")
        sparse = np.load(out / f"day_{day}_sparse.npy")
        assert dense.dtype == np.float32 and dense.shape == (ROWS, 13)
        assert labels.dtype == np.int32 and labels.shape == (ROWS, 1)
        assert sparse.dtype == np.int32 and sparse.shape == (ROWS, 26)
        np.testing.assert_array_equal(dense, np.load(ref / f"day_{day}_dense.npy"))
        np.testing.assert_array_equal(labels, np.load(ref / f"day_{day}_labels.npy"))
        np.testing.assert_array_equal(sparse, np.load(ref / f"day_{day}_sparse_contig_freq.npy"))
    assert layout["format"] == "criteo-1tb-npy" and layout["days"] == [0, 1, 2]
    assert layout["rows"] == [ROWS] * 3 and layout["version"] == 1 and layout["source"] == str(raw)
    assert json.loads((out / "layout.json").read_text()) == layout
    every = np.concatenate([np.load(out / f"day_{d}_sparse.npy") for d in range(3)])
    for k, size in enumerate(layout["num_embeddings_per_feature"]):
        used = set(np.unique(every[:, k]).tolist())
        # torchrec's numbering: frequent ids 2, 3, ... with no gap; rare ones share 1; 0 unused
        assert used - {1} == set(range(2, size)), k
    assert any(1 in np.unique(every[:, k]) for k in range(26)), "the sample has ids below the threshold"


def test_frequency_threshold_shares_one_id_and_max_ind_range_caps_tables(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    cats = ["0000000a"] * 3 + ["0000000b"] + [f"{i:08x}" for i in range(100, 104)]  # a x3, b once, 4 singles
    lines = ["\t".join(["1"] + ["1"] * 13 + [c] * 26) + "\n" for c in cats]
    (raw / "day_0").write_text("".join(lines[:4]))
    (raw / "day_1").write_text("".join(lines[4:]))
    layout, _ = run_prepare(raw, tmp_path / "t2", "--frequency_threshold", 2)
    assert layout["num_embeddings_per_feature"] == [3] * 26  # a -> 2; b and the singles -> 1
    ids = np.concatenate([np.load(tmp_path / "t2" / f"day_{d}_sparse.npy")[:, 0] for d in (0, 1)])
    assert ids.tolist() == [2, 2, 2, 1, 1, 1, 1, 1]
    layout, _ = run_prepare(raw, tmp_path / "cap", "--max_ind_range", 4)
    assert layout["num_embeddings_per_feature"] == [4] * 26  # 6 distinct -> ids 2..7, capped at 4
    ids = np.concatenate([np.load(tmp_path / "cap" / f"day_{d}_sparse.npy")[:, 0] for d in (0, 1)])
    assert ids.tolist() == [v % 4 for v in [2, 2, 2, 3, 4, 5, 6, 7]]


@pytest.mark.parametrize("distribution", ["uniform", "pareto"])
def test_multi_hot_npz_is_mlperfs_materialised_layout_and_lookup_tables(raw, tmp_path, monkeypatch, distribution):
    monkeypatch.setattr(multi_hot, "CHUNK_ROWS", 100_003)  # the 3M-row table drawn in chunks, as 40M-row ones are
    out = tmp_path / "out"
    layout, _ = run_prepare(raw, out, "--multi_hot_sizes", ",".join(map(str, MLPERF_SIZES)),
                            "--multi_hot_distribution_type", distribution, "--max_ind_range", 200,
                            "--num_embeddings_per_feature", ",".join(map(str, MLPERF_TABLES)))
    rows = layout["num_embeddings_per_feature"]
    assert layout["multi_hot_sizes"] == MLPERF_SIZES and rows == MLPERF_TABLES
    # The reference's tables (mlcommons/training aa344c7 recommendation_v2/torchrec_dlrm/
    # multi_hot.py, Multihot.__make_multi_hot_indices_tables), drawn whole with MLPerf's
    # num_embeddings_per_feature (its 40M tables at the cap), not the data's distinct + 2.
    np.random.seed(0)
    tables = []
    for n, size in zip(MLPERF_TABLES, MLPERF_SIZES):
        if distribution == "uniform":
            synthetic = np.random.randint(0, n, size=(n, size - 1))
        else:
            with np.errstate(invalid="ignore"):
                synthetic = np.random.pareto(a=0.25, size=(n, size - 1)).astype(np.int32) % n
        tables.append(np.concatenate((np.arange(n)[:, None], synthetic), axis=-1).astype(np.int32))
    for day in range(3):
        path = out / f"day_{day}_sparse_multi_hot.npz"
        sparse = np.load(out / f"day_{day}_sparse.npy")
        with zipfile.ZipFile(path) as archive:
            assert all(i.compress_type == zipfile.ZIP_STORED for i in archive.infolist())
        with np.load(path) as npz:  # materialize_synthetic_multihot_dataset.py's keys "0".."25"
            assert npz.files == [str(k) for k in range(26)]
            for k, size in enumerate(MLPERF_SIZES):
                member = npz[str(k)]
                assert member.dtype == np.int32 and member.shape == (ROWS, size)
                np.testing.assert_array_equal(member, tables[k][sparse[:, k] % rows[k]])
    assert discover(str(out))[0] == "npz"  # the trainer's reader takes it as MLPerf's layout
    assert [m.shape for m in open_npz_members(str(out / "day_0_sparse_multi_hot.npz"))] == \
        [(ROWS, s) for s in MLPERF_SIZES]
    assert not (out / ".prepare" / "multi_hot").exists(), "the lookup tables are removed at the end"


def test_second_run_skips_finished_days_and_redoes_a_cut_short_one(raw, tmp_path, capsys):
    out = tmp_path / "out"
    first, log = run_prepare(raw, out, "--frequency_threshold", 2, capsys=capsys)
    assert "day 3/3" in log and "skipped" not in log
    before = {p.name: p.read_bytes() for p in out.glob("day_*.npy")}
    cut = out / "day_1_sparse.npy"
    cut.write_bytes(before[cut.name][: len(before[cut.name]) // 2])  # a copy cut short
    (out / ".prepare" / "done" / "day_2.json").unlink()  # died before its marker
    (out / "day_2_dense.npy").unlink()
    second, log = run_prepare(raw, out, "--frequency_threshold", 2, capsys=capsys)
    assert second == first
    assert log.count("scan") == 3 and log.count("skipped (done before)") == 3 + 1  # 3 scans, day_0
    assert "vocabulary: skipped" in log
    assert "day_0 done, 600 rows, skipped" in log
    assert "day_1 done, 600 rows, 0." in log and "day_2 done, 600 rows, 0." in log
    assert {p.name: p.read_bytes() for p in out.glob("day_*.npy")} == before
    assert not list(out.glob("*.tmp"))
    third, log = run_prepare(raw, out, "--frequency_threshold", 3, capsys=capsys)
    assert "vocabulary 26/26" in log and log.count("skipped (done before)") == 3  # new ids: days redone


def test_source_in_an_s3_bucket_read_by_two_worker_processes(raw, tmp_path, monkeypatch):
    """Day files from a bucket through s3fs (one gzip-compressed, as Criteo ships them), two
    spawned workers, the same files as from the local directory."""
    run_prepare(raw, tmp_path / "local")
    for key in list(os.environ):
        if key.startswith(("AWS_",)):
            monkeypatch.delenv(key)
    for server in emulators.running(emulators.moto_s3()):
        emulators.apply_env(monkeypatch, server.env)
        import s3fs

        fs = s3fs.S3FileSystem()
        fs.mkdir("criteo-raw")
        fs.pipe("criteo-raw/days/day_0.gz", gzip.compress((raw / "day_0").read_bytes()))
        for day in (1, 2):
            fs.put(str(raw / f"day_{day}"), f"criteo-raw/days/day_{day}")
        layout, _ = run_prepare("s3://criteo-raw/days", tmp_path / "s3", "--workers", 2)
    assert layout["source"] == "s3://criteo-raw/days" and layout["rows"] == [ROWS] * 3
    for name in (p.name for p in (tmp_path / "local").glob("day_*.npy")):
        assert (tmp_path / "s3" / name).read_bytes() == (tmp_path / "local" / name).read_bytes(), name


def test_a_retry_reaches_the_bucket_with_what_the_pod_has_by_then(raw, tmp_path, monkeypatch,
                                                                   capsys):
    """A retry builds its own file system object: one cached from a failed attempt would keep
    that attempt's endpoint or credentials (gcsfs falls back to anonymous when workload
    identity is not yet bound) and fail every retry the same way."""
    import trainer.prepare.__main__ as entry

    for key in list(os.environ):
        if key.startswith(("AWS_",)):
            monkeypatch.delenv(key)
    for server in emulators.running(emulators.moto_s3()):
        emulators.apply_env(monkeypatch, server.env)
        import s3fs

        fs = s3fs.S3FileSystem(skip_instance_cache=True)
        fs.mkdir("criteo-raw")
        for day in range(3):
            fs.put(str(raw / f"day_{day}"), f"criteo-raw/days/day_{day}")
        # The first attempt sees a closed port (nothing answers yet); the bucket's endpoint
        # reaches the pod before the retry.
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{emulators.free_port()}")
        monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
        # The retry's own wait only (time.sleep itself is every thread's in the worker).
        monkeypatch.setattr(entry, "time", SimpleNamespace(
            sleep=lambda _: os.environ.update(AWS_ENDPOINT_URL_S3=server.url)))
        out = tmp_path / "out"
        assert main(["--source", "s3://criteo-raw/days", "--output", str(out),
                     "--retry_seconds", "0"]) == 0
    log = capsys.readouterr().out
    assert "attempt 1 of 5 failed" in log and "attempt 2 of" not in log
    assert json.loads((out / "layout.json").read_text())["rows"] == [ROWS] * 3


def test_kaggle_train_txt_becomes_train_npys(tmp_path):
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "train.txt").write_text("".join(sample_lines(0, 300)))
    layout, _ = run_prepare(tmp_path / "raw", tmp_path / "out")
    assert layout["format"] == "criteo-kaggle-npy" and layout["days"] is None and layout["rows"] == [300]
    assert discover(str(tmp_path / "out")) == ("npy", [str(tmp_path / "out" / "train")])


@pytest.mark.parametrize("flags, named", [
    (["--workers", "0"], "--workers=0"),
    (["--frequency_threshold", "-1"], "--frequency_threshold=-1"),
    (["--max_ind_range", "forty"], "--max_ind_range=forty"),
    (["--multi_hot_sizes", "3,2,1"], "--multi_hot_sizes=3,2,1"),
    (["--multi_hot_distribution_type", "zipf"], "--multi_hot_distribution_type=zipf"),
    (["--dataset", "criteo_4tb"], "--dataset=criteo_4tb"),
    (["--days", "0-30"], "--days=0-30"),
    (["--days", "0-5"], "--days=0,1,2,3,4,5"),  # days the source does not have
])
def test_bad_flags_exit_2_naming_flag_value_and_allowed(raw, tmp_path, capsys, flags, named):
    assert main(["--source", str(raw), "--output", str(tmp_path / "out"), *flags]) == 2
    err = capsys.readouterr().err
    assert named in err and ("one of" in err or ">=" in err or "found" in err or "within" in err
                             or "comma separated" in err or "integer" in err), err
    assert not (tmp_path / "out" / "layout.json").exists()


def test_command_line_exits_2_on_a_missing_source(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "trainer.prepare", "--source", str(tmp_path / "nothing"),
                           "--output", str(tmp_path / "out")], cwd=REPO, env=env(), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and "--source=" in proc.stderr and "not found" in proc.stderr


def test_trainer_reads_the_prepared_days_within_their_tables(raw, tmp_path):
    from trainer.data.criteo import CriteoSource

    layout, _ = run_prepare(raw, tmp_path / "out", "--frequency_threshold", 2)
    reader = CriteoSource(str(tmp_path / "out"), layout["num_embeddings_per_feature"], 64, 0, 1)
    batch = next(reader.train_batches(0, 0))
    np.testing.assert_array_equal(batch.dense_features.numpy(),
                                  np.load(tmp_path / "out" / "day_0_dense.npy")[:64])
    assert reader.malformed_rows == 0 and len(batch.labels) == 64
    shutil.rmtree(tmp_path / "out")


def test_the_trainer_takes_its_table_sizes_from_layout_json_unless_given(raw, tmp_path):
    """The stack passes no sizes (workloads/prepare.py): the model gets a row for every id
    the preparation numbered, and a user's explicit sizes still win."""
    from trainer.config import TrainConfig
    from trainer.distributed import pooling_factors

    layout, _ = run_prepare(raw, tmp_path / "out", "--frequency_threshold", 2,
                            "--multi_hot_sizes", ",".join(map(str, MLPERF_SIZES)))
    prepared = TrainConfig(dataset_path=str(tmp_path / "out"))
    assert prepared.table_sizes == layout["num_embeddings_per_feature"]
    assert pooling_factors(prepared) == MLPERF_SIZES  # the planner sees the npz's ids per sample
    ids = np.load(tmp_path / "out" / "day_0_sparse.npy")
    assert (ids.max(axis=0) < np.array(prepared.table_sizes)).all()
    given = TrainConfig(dataset_path=str(tmp_path / "out"), num_embeddings_per_feature=[7] * 26)
    assert given.table_sizes == [7] * 26
    raw_tsv = TrainConfig(dataset_path=str(raw))
    assert raw_tsv.table_sizes == [TrainConfig().num_embeddings] * 26
    assert pooling_factors(raw_tsv) is None


# --- how a run ends: retries, and the verdict the training pods read --------------------------

def flaky(monkeypatch, failing_calls: set[int]) -> None:
    """write.run fails the calls numbered in `failing_calls` (1 = the first) as a dropped
    connection would, and works otherwise."""
    real, calls = write.run, {"n": 0}

    def run(*args):
        calls["n"] += 1
        if calls["n"] in failing_calls:
            raise ConnectionResetError("connection reset by peer")
        return real(*args)

    monkeypatch.setattr(write, "run", run)


def test_a_failure_is_retried_in_process_and_keeps_the_finished_days(raw, tmp_path, monkeypatch,
                                                                     capsys):
    monkeypatch.setenv("PREPARE_RUN_ID", "job-uid-1")
    flaky(monkeypatch, failing_calls={2})  # the second day, once
    out = tmp_path / "out"
    assert main(["--source", str(raw), "--output", str(out), "--retry_seconds", "0"]) == 0
    log = capsys.readouterr().out
    assert "attempt 1 of 5 failed: connection reset by peer; retrying in 0 s" in log
    assert "day 1/3 day_0 done, 600 rows, skipped (done before)" in log  # kept from attempt 1
    layout = json.loads((out / "layout.json").read_text())
    assert layout["run_id"] == "job-uid-1" and sum(layout["rows"]) == 3 * ROWS
    assert json.loads((out / "prepare-heartbeat.json").read_text())["run_id"] == "job-uid-1"
    assert not (out / "prepare-failed.json").exists()


def test_a_failure_past_its_retries_exits_1_and_records_this_run_s_verdict(raw, tmp_path,
                                                                            monkeypatch, capsys):
    monkeypatch.setenv("PREPARE_RUN_ID", "job-uid-2")
    working = write.run
    flaky(monkeypatch, failing_calls=set(range(1, 100)))
    out = tmp_path / "out"
    assert main(["--source", str(raw), "--output", str(out), "--retries", "2",
                 "--retry_seconds", "0"]) == 1
    assert "attempt 2 of 3 failed" in capsys.readouterr().out
    failed = json.loads((out / "prepare-failed.json").read_text())
    assert failed == {"run_id": "job-uid-2", "exit_status": 1,
                      "error": "prepare: failed: ConnectionResetError: connection reset by peer"}
    assert not (out / "layout.json").exists()
    # The next run (the Job recreated once the cause is fixed) starts with no verdict.
    monkeypatch.setenv("PREPARE_RUN_ID", "job-uid-3")
    monkeypatch.setattr(write, "run", working)
    assert main(["--source", str(raw), "--output", str(out), "--retry_seconds", "0"]) == 0
    assert not (out / "prepare-failed.json").exists()
    assert json.loads((out / "layout.json").read_text())["run_id"] == "job-uid-3"


def test_a_bad_flag_is_not_retried_and_is_recorded_with_exit_2(raw, tmp_path, monkeypatch):
    monkeypatch.setenv("PREPARE_RUN_ID", "job-uid-4")
    out = tmp_path / "out"
    assert main(["--source", str(raw), "--output", str(out), "--days", "0-5"]) == 2
    failed = json.loads((out / "prepare-failed.json").read_text())
    assert failed["run_id"] == "job-uid-4" and failed["exit_status"] == 2
    assert "--days=0,1,2,3,4,5" in failed["error"]


def test_a_flag_that_does_not_parse_is_recorded_too(raw, tmp_path, monkeypatch):
    monkeypatch.setenv("PREPARE_RUN_ID", "job-uid-5")
    out = tmp_path / "out"
    assert main(["--source", str(raw), f"--output={out}", "--no_such_flag"]) == 2
    failed = json.loads((out / "prepare-failed.json").read_text())
    assert failed["exit_status"] == 2 and "--no_such_flag" in failed["error"]


def test_a_run_by_hand_stamps_no_run_id(raw, tmp_path, monkeypatch):
    monkeypatch.delenv("PREPARE_RUN_ID", raising=False)
    layout, _ = run_prepare(raw, tmp_path / "out")
    assert layout["run_id"] is None


def test_an_azure_source_keeps_its_account_in_every_file_url():
    """adlfs lists `container/prefix/day_0` and takes the account from the URL's host only: the
    workers must open the same account the listing read, not AZURE_STORAGE_ACCOUNT_NAME's."""
    from adlfs import AzureBlobFileSystem

    source_uri = "az://raw@criteodata.blob.core.windows.net/criteo/1tb"
    root = AzureBlobFileSystem._strip_protocol(source_uri)
    url = source._url(source_uri, root, f"{root}/day_0.gz")
    assert url == "az://raw@criteodata.blob.core.windows.net/criteo/1tb/day_0.gz"
    assert AzureBlobFileSystem._get_kwargs_from_urls(url) == {"account_name": "criteodata"}
    assert source._url("s3://criteo-raw/days/", "criteo-raw/days", "criteo-raw/days/day_3") \
        == "s3://criteo-raw/days/day_3"


def test_the_heartbeat_beats_while_the_run_lives_and_stops_with_it(tmp_path, monkeypatch):
    from trainer.prepare.status import Heartbeat

    monkeypatch.setenv("PREPARE_RUN_ID", "job-uid-6")
    beat = tmp_path / "prepare-heartbeat.json"
    with Heartbeat(str(tmp_path), every=0.05):
        first = beat.stat().st_mtime_ns
        deadline = time.monotonic() + 5
        while beat.stat().st_mtime_ns == first and time.monotonic() < deadline:
            time.sleep(0.02)
        assert beat.stat().st_mtime_ns > first  # beating
    assert json.loads(beat.read_text())["run_id"] == "job-uid-6"
    last = beat.stat().st_mtime_ns
    time.sleep(0.2)
    assert beat.stat().st_mtime_ns == last  # stopped with the run
