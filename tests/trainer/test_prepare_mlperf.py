"""``python -m trainer.prepare`` with MLPerf's settings (cap, table sizes, shuffle, materialized
multi-hot) gives MLPerf's own data: the same days as the reference pipeline (torchrec 1.8.0's
``BinaryCriteoUtils`` steps 1-3, then mlcommons' materialize script) run on the same raw days."""

from __future__ import annotations

import numpy as np
import pytest

from tests.trainer.mlperf_pipeline import PARTS, materialize, steps_1_to_3
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


def test_multi_hot_days_written_in_parallel_equal_the_serial_ones(tmp_path, monkeypatch):
    """--workers writes the multi-hot days in a process pool; the files are the serial ones."""
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
    assert len(files[1]) == 4 * DAYS and files[4] == files[1]


def test_the_shuffle_rounds_ids_through_float32_before_hashing_them_as_the_reference(tmp_path):
    """Column 0 of Criteo 1TB holds 227M contiguous ids: the reference's float32 array rounds
    45,000,001 to 45,000,000, its reader hashes that to 5,000,000; hashing first gives 5,000,001."""
    from tests.trainer.mlperf_pipeline import torchrec_criteo

    rng = np.random.default_rng(5)
    rows = [800, 1100, 600, 500]
    ours, ref = tmp_path / "ours", tmp_path / "ref"
    for folder in (ours, ref / "in", ref / "out"):
        folder.mkdir(parents=True)
    for day, n in enumerate(rows):
        sparse = rng.integers(0, 293_000_000, (n, 26))
        sparse[0, 0] = 45_000_001
        arrays = {"dense": np.log(rng.integers(2, 1000, (n, 13))).astype(np.float32),
                  "sparse": sparse.astype(np.int32), "labels": rng.integers(0, 2, (n, 1)).astype(np.int32)}
        for part, array in arrays.items():
            np.save(ours / f"day_{day}_{part}.npy", array)
            np.save(ref / "in" / f"day_{day}_{part}.npy", array)
    torchrec_criteo().BinaryCriteoUtils.shuffle(str(ref / "in"), str(ref / "in"), str(ref / "out"),
                                                dict(enumerate(rows[:-1])), days=len(rows), random_seed=0)
    assert shuffle.shuffle(str(tmp_path / "work"), [str(ours / f"day_{d}") for d in range(3)],
                           rows[:-1], 0, hashes=MLPERF_TABLE_SIZES)
    hashed = np.concatenate([np.load(ours / f"day_{d}_sparse.npy") for d in range(3)])
    reference = np.concatenate([np.load(ref / "out" / f"day_{d}_sparse.npy") for d in range(3)])
    np.testing.assert_array_equal(hashed, reference % np.array(MLPERF_TABLE_SIZES))
    assert 5_000_000 in hashed[:, 0] and 5_000_001 not in hashed[:, 0]
    for day in range(3):
        for part in ("dense", "labels"):
            name = f"day_{day}_{part}.npy"
            assert (ours / name).read_bytes() == (ref / "out" / name).read_bytes(), name
