"""``python -m trainer.prepare --shuffle_seed 0`` against MLPerf's own preprocessing, run here with
torchrec 1.8's functions as mlcommons/training aa344c7 recommendation_v2/torchrec_dlrm/scripts/
process_Criteo_1TB_Click_Logs_dataset.sh chains them: step 1 ``npy_preproc_criteo``
(``BinaryCriteoUtils.tsv_to_npys`` per day), step 2 ``contiguous_preproc_criteo
--frequency_threshold 0`` (``sparse_to_contiguous``, the outputs renamed to day_<i>_sparse.npy),
step 3 ``shuffle_preproc_criteo --random_seed 0`` (``BinaryCriteoUtils.shuffle`` over the rows
of every day but the last, counted from the labels files), vendored (tests/trainer/mlperf_pipeline.py).
The ids are capped as MLPerf's are: the reference hashes step 3's ids when it reads them."""

from __future__ import annotations

import os

import numpy as np
import pytest

from tests.trainer.mlperf_pipeline import steps_1_to_3, torchrec_criteo
from trainer.data.criteo import CriteoSource
from trainer.prepare import shuffle, source
from trainer.prepare.cli import parse
from trainer.prepare.run import prepare
from trainer.prepare.sample import write_sample
from trainer.recipe import MLPERF_TABLE_SIZES

DAYS = 4  # three training days and the validation/test day
ROWS = 1500
PARTS = ("dense", "sparse", "labels")
CAP = 97  # --max_ind_range: the sample's larger columns hold a few hundred ids


@pytest.mark.parametrize("seed", [0, 7])
def test_shuffled_days_equal_mlperfs_preprocessing_byte_for_byte(tmp_path, monkeypatch, seed):
    monkeypatch.setattr(source, "BLOCK_BYTES", 64 << 10)  # each day streamed in several blocks
    monkeypatch.setattr(shuffle, "CHUNK_ROWS", 1000)  # each output day gathered in chunks
    write_sample(str(tmp_path / "raw"), days=DAYS, rows=ROWS)
    raw, out, ref = tmp_path / "raw", tmp_path / "out", tmp_path / "ref"
    steps_1_to_3(raw, ref, DAYS, seed)
    layout = prepare(parse(["--source", str(raw), "--output", str(out), "--max_ind_range", str(CAP),
                            "--shuffle_seed", str(seed), "--workers", "2"]))
    assert layout["shuffle_seed"] == seed
    hashes = np.array(layout["num_embeddings_per_feature"])
    assert (np.load(ref / "out" / "day_0_sparse.npy").max(axis=0) >= CAP).sum() >= 6  # ids past the cap
    for day in range(DAYS):
        for part in ("dense", "labels"):
            name = f"day_{day}_{part}.npy"
            assert (out / name).read_bytes() == (ref / "out" / name).read_bytes(), name
        # The reference's ids hashed as its reader does (hashes=num_embeddings_per_feature), as
        # int32 (the last day is its copy of step 2's int64 ids; ours are int32, the same values).
        ours = np.load(out / f"day_{day}_sparse.npy")
        assert ours.dtype == np.int32 and ours.max() < CAP
        np.testing.assert_array_equal(ours, np.load(ref / "out" / f"day_{day}_sparse.npy") % hashes)
    # The rows really moved across days, and none was lost or repeated.
    before = np.concatenate([np.load(ref / "step1" / f"day_{d}_labels.npy") for d in range(DAYS - 1)])
    after = np.concatenate([np.load(out / f"day_{d}_labels.npy") for d in range(DAYS - 1)])
    assert not np.array_equal(before, after) and before.sum() == after.sum()
    # Validation and test are day 23's halves, as torchrec's InMemoryBinaryCriteoIterDataPipe
    # cuts them (the first ceil(n / 2) rows, then the rest).
    src = CriteoSource(str(out), layout["num_embeddings_per_feature"], 250, 0, 1)
    val = sum(len(b.labels) for b in src.eval_batches(None))
    test = sum(len(b.labels) for b in src.test_batches(None))
    assert (val, test) == (250 * 3, 250 * 3)  # 750 + 750 rows: whole batches, no padding here


def test_a_rerun_after_the_shuffle_keeps_the_shuffled_days(tmp_path, monkeypatch):
    write_sample(str(tmp_path / "raw"), days=3, rows=400)
    args = ["--source", str(tmp_path / "raw"), "--output", str(tmp_path / "out"), "--shuffle_seed", "0"]
    prepare(parse(args))
    first = {p: p.read_bytes() for p in (tmp_path / "out").glob("day_*.npy")}
    prepare(parse(args))  # every pass skipped: the shuffled days are not shuffled again
    assert {p: p.read_bytes() for p in (tmp_path / "out").glob("day_*.npy")} == first


def test_shuffle_of_npy_days_with_ids_past_float32_precision_equals_torchrecs(tmp_path):
    """MLPerf's 40M-row tables have ids above 2**24: the reference's float32 array rounds them,
    and its files keep the rounded ids; so do these."""
    rng = np.random.default_rng(3)
    rows = [1000, 1300, 700, 900]
    ours, ref = tmp_path / "ours", tmp_path / "ref"
    for folder in (ours, ref / "in", ref / "out"):
        folder.mkdir(parents=True)
    for day, n in enumerate(rows):
        arrays = {"dense": np.log(rng.integers(2, 1000, (n, 13))).astype(np.float32),
                  "sparse": rng.integers(0, 40_000_000, (n, 26)).astype(np.int32),
                  "labels": rng.integers(0, 2, (n, 1)).astype(np.int32)}
        for part, array in arrays.items():
            np.save(ours / f"day_{day}_{part}.npy", array)
            np.save(ref / "in" / f"day_{day}_{part}.npy", array)
    torchrec_criteo().BinaryCriteoUtils.shuffle(str(ref / "in"), str(ref / "in"), str(ref / "out"),
                              dict(enumerate(rows[:-1])), days=len(rows), random_seed=0)
    assert shuffle.shuffle(str(tmp_path / "work"), [str(ours / f"day_{d}") for d in range(3)],
                           rows[:-1], 0)
    for day in range(3):
        for part in PARTS:
            name = f"day_{day}_{part}.npy"
            assert (ours / name).read_bytes() == (ref / "out" / name).read_bytes(), name
    rounded = np.load(ours / "day_0_sparse.npy")
    assert (rounded >= 1 << 24).any() and (rounded[rounded >= 1 << 24] % 2 == 0).all()


def test_the_shuffle_rounds_ids_through_float32_before_hashing_them_as_the_reference(tmp_path):
    """Column 0 of Criteo 1TB holds 227M contiguous ids: the reference's float32 array rounds
    45,000,001 to 45,000,000, its reader hashes that to 5,000,000; hashing first gives 5,000,001."""
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
