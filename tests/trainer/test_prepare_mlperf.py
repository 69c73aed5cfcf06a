"""``python -m trainer.prepare`` with MLPerf's settings (cap, table sizes, shuffle, materialized
multi-hot) gives MLPerf's own data: the same days as the reference pipeline (torchrec 1.8.0's
``BinaryCriteoUtils`` steps 1-3, then mlcommons' materialize script) run on the same raw days."""

from __future__ import annotations

import numpy as np
import pytest

from tests.trainer.mlperf_pipeline import materialize, steps_1_to_3
from trainer.data.criteo import CriteoSource, discover
from trainer.prepare import multi_hot, shuffle, source
from trainer.prepare.cli import parse
from trainer.prepare.run import prepare
from trainer.prepare.sample import write_sample
from trainer.recipe import MLPERF_MULTI_HOT_SIZES, MLPERF_TABLE_SIZES

DAYS = 4  # three training days and the validation/test day
ROWS = 1200
CAP = 23  # stands in for 40,000,000: the sample's columns hold up to a few hundred ids
# MLPerf's num_embeddings_per_feature with its 40M tables scaled to CAP (a 40M x 100 lookup table
# is 16 GB); every other size is MLPerf's own (39060, 17295, ..., 3067956, ...).
SIZES = [CAP if n == 40_000_000 else n for n in MLPERF_TABLE_SIZES]


@pytest.mark.parametrize("workers", [1, 3])
def test_mlperf_preparation_equals_the_reference_pipeline_on_ids_past_the_cap(tmp_path, monkeypatch,
                                                                              workers):
    monkeypatch.setattr(source, "BLOCK_BYTES", 32 << 10)
    monkeypatch.setattr(shuffle, "CHUNK_ROWS", 500)
    monkeypatch.setattr(multi_hot, "CHUNK_ROWS", 1 << 20)  # the 3M-row table in few chunks
    raw, out, ref = tmp_path / "raw", tmp_path / "out", tmp_path / "ref"
    write_sample(str(raw), days=DAYS, rows=ROWS)
    shuffled = steps_1_to_3(raw, ref, DAYS, seed=0)
    materialize(shuffled, ref / "multi_hot", DAYS, SIZES, MLPERF_MULTI_HOT_SIZES, "uniform")
    layout = prepare(parse([
        "--source", str(raw), "--output", str(out), "--max_ind_range", str(CAP),
        "--num_embeddings_per_feature", ",".join(map(str, SIZES)), "--shuffle_seed", "0",
        "--multi_hot_sizes", ",".join(map(str, MLPERF_MULTI_HOT_SIZES)), "--workers", str(workers)]))

    assert layout["num_embeddings_per_feature"] == SIZES  # the model's tables, not distinct + 2
    contiguous = np.load(ref / "step2" / "day_0_sparse.npy")
    past = contiguous.max(axis=0) >= np.array(SIZES)
    assert past[[9, 19, 21]].all() and past.sum() >= 8, "ids past the cap (and other tables' sizes)"
    for day in range(DAYS):
        for part in ("dense", "labels"):
            name = f"day_{day}_{part}.npy"
            assert (out / name).read_bytes() == (shuffled / name).read_bytes(), name
        # The reference keeps step 3's ids and hashes them when it reads them
        # (InMemoryBinaryCriteoIterDataPipe(hashes=num_embeddings_per_feature)); ours are stored hashed.
        ours = np.load(out / f"day_{day}_sparse.npy")
        assert ours.dtype == np.int32
        np.testing.assert_array_equal(ours, np.load(shuffled / f"day_{day}_sparse.npy") % np.array(SIZES))
        name = f"day_{day}_sparse_multi_hot.npz"
        with np.load(out / name) as mine, np.load(ref / "multi_hot" / name) as theirs:
            assert mine.files == theirs.files == [str(k) for k in range(26)]
            for k in mine.files:  # zip timestamps differ; every member's bytes do not
                a, b = mine[k], theirs[k]
                assert (a.dtype, a.shape) == (b.dtype, b.shape) and a.tobytes() == b.tobytes(), (day, k)
    assert discover(str(out))[0] == "npz"
    src = CriteoSource(str(out), layout["num_embeddings_per_feature"], 200, 0, 1)
    batch = next(src.train_batches(0, 0))
    assert batch.sparse_features.values().dtype.itemsize == 4  # int32 ids, as the reference's


def test_multi_hot_days_written_in_parallel_equal_the_serial_ones(tmp_path, monkeypatch, capsys):
    """--workers writes the multi-hot days in a process pool (one day a task, each reported as
    it ends); the files are the serial ones, byte for byte."""
    monkeypatch.setattr(source, "BLOCK_BYTES", 32 << 10)
    raw = tmp_path / "raw"
    write_sample(str(raw), days=DAYS, rows=600)
    files = {}
    for workers in (1, 4):
        out = tmp_path / f"out{workers}"
        prepare(parse(["--source", str(raw), "--output", str(out), "--max_ind_range", str(CAP),
                       "--shuffle_seed", "0", "--workers", str(workers), "--multi_hot_sizes",
                       ",".join(map(str, MLPERF_MULTI_HOT_SIZES))]))
        files[workers] = {p.name: p.read_bytes() for p in sorted(out.glob("day_*"))}
        log = capsys.readouterr().out
        assert sorted(line.split(":")[1].split()[-1] for line in log.splitlines()
                      if line.startswith("prepare: multi-hot ") and " rows, " in line) == \
            [f"day_{d}" for d in range(DAYS)], log
    assert len(files[1]) == 4 * DAYS and files[4] == files[1]
