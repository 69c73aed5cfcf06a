"""``python -m trainer.prepare --shuffle_seed 0`` against MLPerf's own preprocessing, run here with
torchrec 1.8's functions as mlcommons/training aa344c7 recommendation_v2/torchrec_dlrm/scripts/
process_Criteo_1TB_Click_Logs_dataset.sh chains them: step 1 ``npy_preproc_criteo``
(``BinaryCriteoUtils.tsv_to_npys`` per day), step 2 ``contiguous_preproc_criteo
--frequency_threshold 0`` (``sparse_to_contiguous``, the outputs renamed to day_<i>_sparse.npy),
step 3 ``shuffle_preproc_criteo --random_seed 0`` (``BinaryCriteoUtils.shuffle`` over the rows
of every day but the last, counted from the labels files)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from torchrec.datasets.criteo import BinaryCriteoUtils

from trainer.data.criteo import CriteoSource
from trainer.prepare import shuffle, source
from trainer.prepare.cli import parse
from trainer.prepare.run import prepare
from trainer.prepare.sample import write_sample

DAYS = 4  # three training days and the validation/test day
ROWS = 1500
PARTS = ("dense", "sparse", "labels")


def reference_pipeline(raw, ref, seed: int) -> None:
    """MLPerf's steps 1-3 with torchrec's own functions, as the reference's scripts call them."""
    step1, step2 = ref / "step1", ref / "step2"
    for folder in (step1, step2, ref / "out"):
        folder.mkdir(parents=True)
    for day in range(DAYS):  # npy_preproc_criteo
        BinaryCriteoUtils.tsv_to_npys(str(raw / f"day_{day}"),
                                      *(str(step1 / f"day_{day}_{p}.npy") for p in PARTS))
    BinaryCriteoUtils.sparse_to_contiguous(  # contiguous_preproc_criteo --frequency_threshold 0
        [str(step1 / f"day_{d}_sparse.npy") for d in range(DAYS)], str(step2),
        frequency_threshold=0)
    for day in range(DAYS):
        os.replace(step2 / f"day_{day}_sparse_contig_freq.npy", step2 / f"day_{day}_sparse.npy")
    rows = {d: np.load(step1 / f"day_{d}_labels.npy").shape[0] for d in range(DAYS - 1)}
    BinaryCriteoUtils.shuffle(str(step1), str(step2), str(ref / "out"), rows,  # shuffle_preproc
                              days=DAYS, random_seed=seed)


@pytest.mark.parametrize("seed", [0, 7])
def test_shuffled_days_equal_mlperfs_preprocessing_byte_for_byte(tmp_path, monkeypatch, seed):
    monkeypatch.setattr(source, "BLOCK_BYTES", 64 << 10)  # each day streamed in several blocks
    monkeypatch.setattr(shuffle, "CHUNK_ROWS", 1000)  # each output day gathered in chunks
    write_sample(str(tmp_path / "raw"), days=DAYS, rows=ROWS)
    raw, out, ref = tmp_path / "raw", tmp_path / "out", tmp_path / "ref"
    reference_pipeline(raw, ref, seed)
    layout = prepare(parse(["--source", str(raw), "--output", str(out),
                            "--shuffle_seed", str(seed), "--workers", "2"]))
    assert layout["shuffle_seed"] == seed
    compared = 0
    for day in range(DAYS):
        for part in PARTS:
            name = f"day_{day}_{part}.npy"
            ours, theirs = (out / name).read_bytes(), (ref / "out" / name).read_bytes()
            if day == DAYS - 1 and part == "sparse" and ours != theirs:
                # The last day is the reference's unshuffled copy of step 2's int64 ids; the
                # preparation keeps ids as int32 (trainer/prepare/write.py): same values.
                np.testing.assert_array_equal(np.load(out / name), np.load(ref / "out" / name))
                continue
            assert ours == theirs, name
            compared += 1
    assert compared >= 3 * DAYS - 1
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
    BinaryCriteoUtils.shuffle(str(ref / "in"), str(ref / "in"), str(ref / "out"),
                              dict(enumerate(rows[:-1])), days=len(rows), random_seed=0)
    assert shuffle.shuffle(str(tmp_path / "work"), [str(ours / f"day_{d}") for d in range(3)],
                           rows[:-1], 0)
    for day in range(3):
        for part in PARTS:
            name = f"day_{day}_{part}.npy"
            assert (ours / name).read_bytes() == (ref / "out" / name).read_bytes(), name
    rounded = np.load(ours / "day_0_sparse.npy")
    assert (rounded >= 1 << 24).any() and (rounded[rounded >= 1 << 24] % 2 == 0).all()
