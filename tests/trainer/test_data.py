"""Data: deterministic skewed synthetic batches; Criteo TSV and .npy readers on tiny files."""

import numpy as np
import pytest
import torch

from trainer.data.batch import assemble, batch_tensors
from trainer.data.criteo import CriteoSource, discover
from trainer.data.synthetic import EVAL, TRAIN, SyntheticSource


def _ids(batch):
    return batch.sparse_features.values()


def _samples(batch):
    """One tuple per sample (dense, ids, label): comparable across batches and world sizes."""
    kjt = batch.sparse_features
    ids = torch.stack([kjt[key].values() for key in kjt.keys()], dim=1)
    return [(tuple(d.tolist()), tuple(i.tolist()), float(y))
            for d, i, y in zip(batch.dense_features, ids, batch.labels)]


def _global_batches(make, world_size, count):
    """The global batches as the ranks of one world size see them: their slices, joined."""
    ranks = [list(make(rank, world_size)) for rank in range(world_size)]
    assert all(len(r) == len(ranks[0]) for r in ranks)  # every rank takes every step
    return [sum((_samples(r[step]) for r in ranks), []) for step in range(len(ranks[0]))][:count]


def test_synthetic_sample_i_is_the_same_whatever_the_world_size():
    def source(rank, world, per_rank):
        return SyntheticSource([1000] * 26, per_rank, seed=1, rank=rank, steps_per_epoch=4, world_size=world)

    # 2100 samples per step: slices of 700 per rank cross the generator's blocks.
    one = _global_batches(lambda r, w: source(r, w, 2100).train_batches(1, 0), 1, 4)
    three = _global_batches(lambda r, w: source(r, w, 700).train_batches(1, 0), 3, 4)
    assert one == three and len(one) == 4 and len(set(one[0])) == 2100
    a, b = source(0, 1, 64), source(0, 1, 64)
    assert _samples(a.batch(TRAIN, 7)) == _samples(b.batch(TRAIN, 7))
    assert _samples(a.batch(TRAIN, 7)) != _samples(a.batch(TRAIN, 8))
    assert _samples(a.batch(TRAIN, 0)) != _samples(a.batch(EVAL, 0))
    assert _samples(a.batch(TRAIN, 0)) != _samples(a.batch(TRAIN, 4))  # epoch 1 is fresh data
    # Resuming at global sample 3 * 64 gives exactly steps 3.. of a fresh stream.
    fresh = list(a.train_batches(epoch=1, first_sample=0))[3:]
    resumed = list(b.train_batches(epoch=1, first_sample=3 * 64))
    assert [_samples(x) for x in fresh] == [_samples(y) for y in resumed] and len(resumed) == 1
    # The held-out set is the same whatever the world size.
    held_one = _global_batches(lambda r, w: source(r, w, 64).eval_batches(2), 1, 2)
    held_two = _global_batches(lambda r, w: source(r, w, 32).eval_batches(2), 2, 2)
    assert held_one == held_two


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
    # single file: every 10th line held out; 90 training lines -> 11 batches of 8 lines,
    # the 4 malformed ones dropped from the first four.
    assert [len(b.labels) for b in batches] == [7, 7, 7, 7] + [8] * 7
    b = batches[-1]
    assert b.dense_features.shape == (8, 13) and b.labels.shape == (8,)
    assert set(b.labels.tolist()) <= {0.0, 1.0}
    assert int(b.sparse_features.values().max()) < 7
    assert (b.dense_features >= np.log(2)).all()  # torchrec's log(x - file minimum + 2)
    held_out = list(src.eval_batches(5))
    # 10 lines held out -> a batch of 8, then the last 2 padded to 8 with rows labelled -1
    # (every held-out sample is scored; the padding is not).
    assert [len(b.labels) for b in held_out] == [8, 8]
    assert [int((b.labels >= 0).sum()) for b in held_out] == [8, 2]


def test_criteo_tsv_sample_i_is_the_same_whatever_the_world_size(tmp_path):
    _write_tsv(tmp_path / "all", 107)
    lines = (tmp_path / "all").read_text().splitlines(keepends=True)
    (tmp_path / "all").unlink()
    for day, (lo, hi) in enumerate([(0, 50), (50, 97), (97, 107)]):  # day_2 is held out
        (tmp_path / f"day_{day}").write_text("".join(lines[lo:hi]))

    def make(per_rank):
        return lambda rank, world: CriteoSource(str(tmp_path), [1 << 40] * 26, batch_size=per_rank,
                                                rank=rank, world_size=world).train_batches(0, 0)

    one = _global_batches(make(6), 1, 100)
    three = _global_batches(make(2), 3, 100)
    assert one == three
    flat = [sample for step in one for sample in step]
    assert len(one) == 16 and len(set(flat)) == 96  # 97 lines, the last partial global batch dropped


def test_criteo_tsv_resume_seeks_without_parsing_the_consumed_rows(tmp_path, monkeypatch):
    import trainer.data.criteo as criteo

    data = tmp_path / "day_0"
    _write_tsv(data, 100, BAD_TSV_ROWS)
    monkeypatch.setattr(criteo, "INDEX_STRIDE", 16)  # several index entries in a tiny file
    full = list(CriteoSource(str(data), [1000] * 26, batch_size=4, rank=0, world_size=1).train_batches(0, 0))
    assert (tmp_path / "day_0.lineindex.npy").exists()  # kept beside the file for later runs
    parsed = []
    parse = criteo.parse_block
    monkeypatch.setattr(criteo, "parse_block", lambda block: parsed.extend(block.splitlines()) or parse(block))
    criteo.LineIndex._cache.clear()
    monkeypatch.setattr(criteo, "_scan_lines", lambda path: pytest.fail("index not reused"))
    src = CriteoSource(str(data), [1000] * 26, batch_size=4, rank=0, world_size=1)
    resumed = list(src.train_batches(0, 5 * 4))
    assert [_samples(b) for b in resumed] == [_samples(b) for b in full[5:]] and len(resumed) == 17
    # Only the lines of the batches it yields, and the held-out lines between them (one in
    # ten): sample 20 is line 22, nothing before it is parsed.
    text = data.read_bytes().splitlines()
    assert parsed[0] == text[22] and set(parsed) <= set(text[22:]) and len(parsed) == 4 * 17 + 5
    assert src.malformed_rows == 1  # line 31; lines 4, 11 and 21 come before the resume point


def _write_npy_day(directory, day, n, bad_label_row=None):
    rng = np.random.default_rng(day)
    labels = rng.integers(0, 2, (n, 1)).astype(np.int32)
    if bad_label_row is not None:
        labels[bad_label_row] = 3
    np.save(directory / f"day_{day}_dense.npy", rng.random((n, 13), dtype=np.float32))
    np.save(directory / f"day_{day}_sparse.npy", rng.integers(0, 10**6, (n, 26)).astype(np.int32))
    np.save(directory / f"day_{day}_labels.npy", labels)


def test_criteo_npy_days_split_by_rank_last_day_halved_into_validation_and_test(tmp_path):
    for day in range(3):
        _write_npy_day(tmp_path, day, 40, bad_label_row=5 if day == 0 else None)
    fmt, prefixes = discover(str(tmp_path))
    assert fmt == "npy" and [p.rsplit("/", 1)[-1] for p in prefixes] == ["day_0", "day_1", "day_2"]
    sizes = [100] * 26
    sources = [CriteoSource(str(tmp_path), sizes, batch_size=4, rank=rank, world_size=2) for rank in range(2)]
    per_rank = [list(src.train_batches(0, 0)) for src in sources]
    assert [len(batches) for batches in per_rank] == [10, 10]  # days 0-1: 80 rows, 8 per step
    assert int(per_rank[0][0].sparse_features.values().max()) < 100
    assert len(per_rank[1][0].labels) == 3  # row 5 (label 3) is in rank 1's first slice
    assert [src.malformed_rows for src in sources] == [0, 1]
    # The standard split: day_2 (40 rows) halves into validation (rows 0-19) and test (20-39).
    val = _global_batches(lambda r, w: sources[r].eval_batches(100), 2, 100)
    test = _global_batches(lambda r, w: sources[r].test_batches(100), 2, 100)
    day2 = np.load(tmp_path / "day_2_dense.npy")
    # 20 rows each: two global batches of 8, then the last 4 padded (label -1) to a full batch
    # (rank 0's slice holds them, rank 1's is all padding): every sample is scored.
    assert [len(b) for b in val] == [8, 8, 8] and [len(b) for b in test] == [8, 8, 8]
    for part, rows in ((val, day2[16:20]), (test, day2[36:40])):
        assert [s[0] for s in part[2][:4]] == [tuple(r) for r in rows.tolist()]
        assert [s[2] for s in part[2][4:]] == [-1.0] * 4
    assert [s[0] for s in val[0]] == [tuple(r) for r in day2[:8].tolist()]
    assert [s[0] for s in test[0]] == [tuple(r) for r in day2[20:28].tolist()]
    whole = _global_batches(lambda r, w: CriteoSource(str(tmp_path), sizes, 8, r, w).train_batches(0, 0), 1, 10)
    assert whole == _global_batches(lambda r, w: sources[r].train_batches(0, 0), 2, 10)
    resumed = CriteoSource(str(tmp_path), sizes, batch_size=4, rank=0, world_size=2).train_batches(0, 40)
    assert [_samples(b) for b in resumed] == [_samples(b) for b in per_rank[0][5:]]  # day_1 onwards


def test_empty_dataset_directory_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no Criteo TSV files"):
        discover(str(tmp_path))


def _same_batches(a, b):
    a, b = list(a), list(b)
    assert len(a) == len(b) and a
    for x, y in zip(a, b):
        assert torch.equal(x.dense_features, y.dense_features)
        assert torch.equal(x.sparse_features.values(), y.sparse_features.values())
        assert torch.equal(x.sparse_features.lengths(), y.sparse_features.lengths())
        assert torch.equal(x.labels, y.labels)


def test_tsv_and_torchrecs_own_npy_of_the_same_files_give_the_same_tensors(tmp_path):
    """One dense transform, torchrec's (log(x - file minimum + 2)), whichever format is read:
    the .npy files here are written by torchrec's BinaryCriteoUtils.tsv_to_npys itself."""
    from torchrec.datasets.criteo import BinaryCriteoUtils

    raw, npy, kaggle_raw, kaggle_npy = (tmp_path / d for d in ("raw", "npy", "kraw", "knpy"))
    for folder in (raw, npy, kaggle_raw, kaggle_npy):
        folder.mkdir()
    _write_tsv(raw / "day_0", 100)
    _write_tsv(raw / "day_1", 40)
    (kaggle_raw / "train.txt").write_bytes((raw / "day_0").read_bytes())
    for name, source, out, dataset in (("day_0", raw / "day_0", npy, "criteo_1tb"),
                                       ("day_1", raw / "day_1", npy, "criteo_1tb"),
                                       # criteo_kaggle differs only for a path containing
                                       # "test" (no labels), which pytest's tmp_path does
                                       ("train", kaggle_raw / "train.txt", kaggle_npy, "criteo_1tb")):
        BinaryCriteoUtils.tsv_to_npys(str(source), *(str(out / f"{name}_{part}.npy")
                                                     for part in ("dense", "sparse", "labels")),
                                      dataset)
    assert discover(str(kaggle_npy)) == ("npy", [str(kaggle_npy / "train")])
    sizes = [997] * 26
    for tsv, preprocessed in ((raw, npy), (kaggle_raw / "train.txt", kaggle_npy)):
        a, b = (CriteoSource(str(p), sizes, batch_size=8, rank=0, world_size=1) for p in (tsv, preprocessed))
        _same_batches(a.train_batches(0, 0), b.train_batches(0, 0))
        _same_batches(a.eval_batches(10), b.eval_batches(10))
    a, b = (CriteoSource(str(p), sizes, batch_size=8, rank=0, world_size=1) for p in (raw, npy))
    _same_batches(a.test_batches(10), b.test_batches(10))
    assert np.load(npy / "day_0_dense.npy").min() == np.float32(np.log(2))  # the file's minimum


MLPERF_MULTI_HOT_SIZES = [3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1]


def test_on_the_fly_multi_hot_keeps_the_id_first_and_gives_each_id_fixed_companions():
    from trainer.data.multi_hot import MultiHot

    tables = [50, 3, 10**7] + [1000] * 23
    for distribution in ("uniform", "pareto"):
        multi_hot = MultiHot(MLPERF_MULTI_HOT_SIZES, tables, distribution)
        ids = np.random.default_rng(0).integers(0, tables, (500, 26))
        ids[:, 2] = np.arange(500) * 19_997
        out = multi_hot.expand(ids)
        assert [f.shape for f in out] == [(500, s) for s in MLPERF_MULTI_HOT_SIZES]
        assert all((f[:, 0] == ids[:, k]).all() for k, f in enumerate(out))  # the id itself first
        assert all((f >= 0).all() and (f < tables[k]).all() for k, f in enumerate(out))
        again = multi_hot.expand(ids[::-1])  # same id, same companions, whatever the batch
        assert all((a[::-1] == b).all() for a, b in zip(again, out))
        twenty = out[20][:, 1:]  # 99 companions per id over a 1000-row table: spread
        assert len(np.unique(twenty)) > (300 if distribution == "uniform" else 20)
    batch = assemble(batch_tensors(np.zeros((500, 13), np.float32), out, np.zeros(500, np.float32)))
    kjt = batch.sparse_features
    assert kjt["cat_20"].lengths().tolist() == [100] * 500
    assert torch.equal(kjt["cat_20"].values(), torch.from_numpy(out[20].reshape(-1)))


def test_mlperf_multi_hot_days_are_read_memory_mapped_and_hashed(tmp_path):
    rng = np.random.default_rng(3)
    for day in range(2):
        _write_npy_day(tmp_path, day, 48)
        np.savez(tmp_path / f"day_{day}_sparse_multi_hot.npz",  # MLPerf's layout: 0.npy .. 25.npy
                 **{str(k): rng.integers(0, 10**6, (48, s)).astype(np.int32)
                    for k, s in enumerate(MLPERF_MULTI_HOT_SIZES)})
    fmt, _ = discover(str(tmp_path))
    assert fmt == "npz"
    tables = [997] * 26
    src = CriteoSource(str(tmp_path), tables, batch_size=16, rank=1, world_size=2)
    first = next(iter(src.train_batches(0, 0)))
    members = np.load(tmp_path / "day_0_sparse_multi_hot.npz")
    kjt = first.sparse_features
    for k, size in enumerate(MLPERF_MULTI_HOT_SIZES):
        want = members[f"{k}"][16:32] % 997  # rank 1's slice of the first global batch
        assert torch.equal(kjt[f"cat_{k}"].values(), torch.from_numpy(want.reshape(-1).astype(np.int64)))
        assert kjt[f"cat_{k}"].lengths().tolist() == [size] * 16
    from trainer.data.multi_hot import MultiHot

    with pytest.raises(ValueError, match="--multi_hot_sizes: .* already multi-hot"):
        CriteoSource(str(tmp_path), tables, 16, 0, 1, MultiHot(MLPERF_MULTI_HOT_SIZES, tables, "uniform"))


def test_the_data_modules_form_no_import_circle():
    """The chooser (source.py) sits above the sources (criteo.py, synthetic.py): no module of
    trainer/data imports, even inside a function, one that imports it back."""
    import ast
    from pathlib import Path

    folder = Path(__file__).resolve().parents[2] / "trainer" / "data"
    graph = {}
    for path in folder.glob("*.py"):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("trainer.data."):
                names.add(node.module.split(".")[2])
            elif isinstance(node, ast.Import):
                names |= {a.name.split(".")[2] for a in node.names if a.name.startswith("trainer.data.")}
        graph[path.stem] = names

    def reaches(start, goal, seen=()):
        return any(n == goal or (n not in seen and reaches(n, goal, (*seen, n))) for n in graph.get(start, ()))

    assert graph["source"] >= {"criteo", "synthetic"}
    assert [m for m in graph if reaches(m, m)] == []


@pytest.mark.parametrize("source", ["synthetic", "npy", "on-the-fly"])
def test_ids_travel_as_int32_as_the_reference_s_and_survive_the_reader_buffer(tmp_path, source):
    """The reference's ids are int32 (its .npy/.npz files, its KJT): half the input all-to-all
    and host-to-device bytes of int64. A reader process's packed buffer keeps them int32."""
    from trainer.data.batch import pack, unpack
    from trainer.data.multi_hot import MultiHot

    sizes = [40, 3000] * 13
    if source == "npy":
        rng = np.random.default_rng(0)
        for day in range(2):
            np.save(tmp_path / f"day_{day}_dense.npy", rng.random((64, 13), dtype=np.float32))
            np.save(tmp_path / f"day_{day}_sparse.npy", rng.integers(0, 5000, (64, 26)).astype(np.int32))
            np.save(tmp_path / f"day_{day}_labels.npy", rng.integers(0, 2, (64, 1)).astype(np.int32))
        src = CriteoSource(str(tmp_path), sizes, 16, 0, 1)
    else:
        multi = MultiHot([3, 2] * 13, sizes, "uniform", str(tmp_path)) if source == "on-the-fly" else None
        src = SyntheticSource(sizes, 16, 0, 0, 4, 1, multi)
    tensors = next(src.tensors("train", 0, 0))
    assert tensors.values.dtype == torch.int32 and tensors.lengths.dtype == torch.int32
    back = unpack(pack(tensors))
    assert back.values.dtype == torch.int32 and torch.equal(back.values, tensors.values)
    assert torch.equal(back.dense, tensors.dense) and torch.equal(back.labels, tensors.labels)
    limits = torch.tensor(sizes).repeat_interleave(back.lengths.view(26, -1).sum(dim=1))
    assert (back.values < limits).all()
