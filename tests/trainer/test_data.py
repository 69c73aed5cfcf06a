"""Data: deterministic skewed synthetic batches; Criteo TSV and .npy readers on tiny files."""

import numpy as np
import pytest
import torch

from trainer.data.criteo import CriteoSource, discover
from trainer.data.synthetic import EVAL, TRAIN, SyntheticSource


def _ids(batch):
    return batch.sparse_features.values()


def test_synthetic_batches_are_a_function_of_seed_rank_and_step():
    a = SyntheticSource([1000] * 26, 64, seed=1, rank=0, steps_per_epoch=10)
    b = SyntheticSource([1000] * 26, 64, seed=1, rank=0, steps_per_epoch=10)
    assert torch.equal(_ids(a.batch(TRAIN, 7)), _ids(b.batch(TRAIN, 7)))
    assert torch.equal(a.batch(TRAIN, 7).labels, b.batch(TRAIN, 7).labels)
    other_rank = SyntheticSource([1000] * 26, 64, seed=1, rank=1, steps_per_epoch=10)
    assert not torch.equal(_ids(a.batch(TRAIN, 7)), _ids(other_rank.batch(TRAIN, 7)))
    assert not torch.equal(_ids(a.batch(TRAIN, 7)), _ids(a.batch(TRAIN, 8)))
    assert not torch.equal(_ids(a.batch(TRAIN, 0)), _ids(a.batch(EVAL, 0)))
    # Resuming the stream at batch 3 gives exactly batches 3.. of a fresh stream.
    fresh = list(a.train_batches(epoch=1, start=0))[3:]
    resumed = list(b.train_batches(epoch=1, start=3))
    assert all(torch.equal(_ids(x), _ids(y)) for x, y in zip(fresh, resumed)) and len(fresh) == len(resumed)


def test_synthetic_ids_are_skewed_and_inside_the_tables():
    src = SyntheticSource([5000] * 26, 4096, seed=0, rank=0, steps_per_epoch=1)
    kjt = src.batch(TRAIN, 0).sparse_features
    ids = kjt["cat_3"].values().numpy()
    assert ids.min() >= 0 and ids.max() < 5000
    _, counts = np.unique(ids, return_counts=True)
    top = np.sort(counts)[::-1]
    assert top[: len(top) // 100 + 1].sum() > 0.2 * len(ids)  # top 1% of seen ids: >20% of lookups
    assert len(top) > 500  # and a long tail, not a handful of cached ids


def _tsv_row(label, ints, cats):
    return "\t".join([str(label)] + [str(i) if i is not None else "" for i in ints] + cats) + "\n"


def _write_tsv(path, n, bad_rows=()):
    rng = np.random.default_rng(0)
    lines = []
    for i in range(n):
        ints = [int(v) for v in rng.integers(-1, 100, 13)]
        ints[2] = None  # empty field: allowed in Criteo
        cats = [format(int(v), "08x") for v in rng.integers(0, 2**32, 26)]
        cats[5] = ""
        lines.append(_tsv_row(i % 2, ints, cats))
    for index, text in bad_rows:
        lines[index] = text
    path.write_text("".join(lines))


BAD_TSV_ROWS = [
    (3, "1\t2\t3\n"),                                     # too few columns
    (10, _tsv_row("x", [1] * 13, ["0a"] * 26)),           # label not a number
    (20, _tsv_row(1, [1] * 13, ["zz"] * 26)),             # id not hex
    (30, _tsv_row(2, [1] * 13, ["0a"] * 26)),             # label not 0/1
]


def test_criteo_tsv_rows_are_parsed_hashed_and_malformed_rows_counted(tmp_path):
    data = tmp_path / "day_0"
    _write_tsv(data, 100, BAD_TSV_ROWS)
    table_sizes = [7] * 26
    src = CriteoSource(str(data), table_sizes, batch_size=8, rank=0, world_size=1)
    batches = list(src.train_batches(0, 0))
    assert src.malformed_rows == 4
    # single file: every 10th row held out for evaluation; 96 good rows -> ~86 train -> 10 batches
    assert len(batches) == 10
    b = batches[0]
    assert b.dense_features.shape == (8, 13) and b.labels.shape == (8,)
    assert set(b.labels.tolist()) <= {0.0, 1.0}
    assert int(b.sparse_features.values().max()) < 7
    assert (b.dense_features >= 0).all()  # log1p of non-negative counts
    held_out = list(src.eval_batches(5))
    assert len(held_out) == 1  # 10 rows held out -> one batch of 8


def test_criteo_tsv_ranks_read_disjoint_shares_that_cover_the_file(tmp_path):
    data = tmp_path / "train.txt"
    _write_tsv(data, 97)
    seen = []
    for rank in range(3):
        src = CriteoSource(str(data), [1 << 40] * 26, batch_size=1, rank=rank, world_size=3)
        rows = [tuple(b.sparse_features.values().tolist()) for b in src._batches(src.files, None, 0)]
        seen.append(rows)
    flat = [r for rows in seen for r in rows]
    assert len(flat) == 97 and len(set(flat)) == 97
    assert all(25 <= len(rows) <= 40 for rows in seen)


def test_criteo_tsv_resume_skips_exactly_the_consumed_batches(tmp_path):
    data = tmp_path / "day_0"
    _write_tsv(data, 100, BAD_TSV_ROWS)
    src = CriteoSource(str(data), [1000] * 26, batch_size=4, rank=0, world_size=1)
    full = list(src.train_batches(0, 0))
    resumed = list(src.train_batches(0, 5))
    assert len(resumed) == len(full) - 5
    assert all(torch.equal(a.sparse_features.values(), b.sparse_features.values())
               for a, b in zip(full[5:], resumed))


def _write_npy_day(directory, day, n, bad_label_row=None):
    rng = np.random.default_rng(day)
    labels = rng.integers(0, 2, (n, 1)).astype(np.int32)
    if bad_label_row is not None:
        labels[bad_label_row] = 3
    np.save(directory / f"day_{day}_dense.npy", rng.random((n, 13), dtype=np.float32))
    np.save(directory / f"day_{day}_sparse.npy", rng.integers(0, 10**6, (n, 26)).astype(np.int32))
    np.save(directory / f"day_{day}_labels.npy", labels)


def test_criteo_npy_days_split_by_rank_last_day_held_out(tmp_path):
    for day in range(3):
        _write_npy_day(tmp_path, day, 40, bad_label_row=5 if day == 0 else None)
    fmt, prefixes = discover(str(tmp_path))
    assert fmt == "npy" and [p.rsplit("/", 1)[-1] for p in prefixes] == ["day_0", "day_1", "day_2"]
    sizes = [100] * 26
    per_rank = []
    for rank in range(2):
        src = CriteoSource(str(tmp_path), sizes, batch_size=4, rank=rank, world_size=2)
        train = list(src.train_batches(0, 0))
        per_rank.append(train)
        assert int(train[0].sparse_features.values().max()) < 100
        assert len(list(src.eval_batches(100))) == 5  # day_2: 20 rows per rank
    assert src.malformed_rows == 0  # rank 1 does not read day_0's first half
    rank0 = CriteoSource(str(tmp_path), sizes, batch_size=4, rank=0, world_size=2)
    assert len(list(rank0.train_batches(0, 0))) == 9  # 20 + 20 rows, one malformed -> 39 -> 9 batches
    assert rank0.malformed_rows == 1
    first = [b.dense_features for b in per_rank[0]]
    second = [b.dense_features for b in per_rank[1]]
    assert not any(torch.equal(a, b) for a in first for b in second)


def test_empty_dataset_directory_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no Criteo TSV files"):
        discover(str(tmp_path))
