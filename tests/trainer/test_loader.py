"""Reader processes (--data_workers): the same batches, in the same order, as one thread."""

import numpy as np
import pytest
import torch

from tests.trainer.helpers import TINY, records, run_trainer
from tests.trainer.test_data import BAD_TSV_ROWS, _write_tsv
from trainer.config import parse_config
from trainer.data.loader import BatchStream
from trainer.data.source import make_source


def _stream(cfg, rank, world_size, workers, first, stop=None, split="train"):
    source = make_source(cfg, rank, world_size, cfg.batch_size)
    stream = BatchStream(source, cfg, rank, world_size, cfg.batch_size, split, 0, first, stop,
                         workers=workers)
    try:
        batches = [(b.dense_features, b.sparse_features.values(), b.sparse_features.lengths(),
                    b.labels) for b in stream]
    finally:
        stream.close()
    return batches, source.malformed_rows


def test_reader_processes_hand_over_the_in_process_stream_in_order_with_its_malformed_rows(tmp_path):
    data = tmp_path / "criteo"
    data.mkdir()
    _write_tsv(data / "day_0", 300, BAD_TSV_ROWS)
    _write_tsv(data / "day_1", 100)
    cfg = parse_config(["--dataset_path", str(data), "--batch_size", "16",
                        "--num_embeddings", "500", "--multi_hot_sizes", ",".join(["1", "3"] * 13)])
    # A world of 2: rank 0 from the start (its slices hold 2 malformed rows), rank 1 resumed
    # at global batch 1. 300 rows / 32 per global batch = 9 batches.
    for rank, first, malformed in ((0, 0, 2), (1, 1, 0)):
        alone, alone_bad = _stream(cfg, rank, 2, workers=0, first=first)
        assert len(alone) == 9 - first and alone_bad == malformed
        for workers in (2, 3):
            read, bad = _stream(cfg, rank, 2, workers=workers, first=first)
            assert len(read) == len(alone)
            for got, want in zip(read, alone):
                assert all(torch.equal(g, w) for g, w in zip(got, want))
            assert bad == malformed  # the readers' dropped rows reach the trainer's count
    held_out, _ = _stream(cfg, 0, 1, workers=2, first=0, stop=2, split="val")
    assert [len(b[3]) for b in held_out] == [16, 16]  # a stop is honoured across readers


def test_data_workers_must_not_be_negative():
    with pytest.raises(SystemExit):
        parse_config(["--data_workers", "-1"])


def test_one_train_stream_per_epoch_across_evaluations_trains_the_same_samples(tmp_path):
    """Evaluations split the epoch into segments; the reader processes' stream spans them, so
    no batch built ahead is lost or repeated: the run equals the in-process one."""
    data = tmp_path / "criteo"
    data.mkdir()
    _write_tsv(data / "day_0", 400, BAD_TSV_ROWS)
    _write_tsv(data / "day_1", 100)
    finals = []
    for workers in ("0", "2"):
        metrics = tmp_path / f"m{workers}.jsonl"
        run_trainer(TINY + ["--dataset_path", str(data), "--eval_every", "3", "--log_every", "4",
                            "--data_workers", workers, "--metrics_file", str(metrics)])
        finals.append(records(metrics))
    assert [r["event"] for r in finals[0]] == [r["event"] for r in finals[1]]
    assert sum(r["event"] == "eval" for r in finals[0]) >= 3  # segments of 3 steps
    final = [r for r in finals[0] if r["event"] == "summary"][0]
    assert final["step"] == 12  # 396 good rows / 32: every batch trained once
    for a, b in zip(*finals):
        for key in ("loss", "auc", "malformed_rows", "step"):
            if a.get(key) is not None:
                assert np.isclose(a[key], b[key], rtol=1e-5), (key, a, b)


def test_reader_processes_by_default_for_tsv_only_where_parsing_costs_more_than_the_hand_over(tmp_path):
    from trainer.data.loader import MULTI_HOT_READERS, READERS, readers_for

    npy, npz, tsv = tmp_path / "npy", tmp_path / "npz", tmp_path / "tsv"
    for folder in (npy, npz, tsv):
        folder.mkdir()
    for part in ("dense.npy", "sparse.npy", "labels.npy"):
        (npy / f"day_0_{part}").touch()
        (npz / f"day_0_{part}").touch()
    (npz / "day_0_sparse_multi_hot.npz").touch()
    _write_tsv(tsv / "day_0", 10)

    def readers(*flags, cores=16):
        cfg = parse_config(list(flags))
        return readers_for(cfg, make_source(cfg, 0, 1, cfg.batch_size), cores=cores)

    multi_hot = ["--multi_hot_sizes", ",".join(["2"] * 26)]
    assert readers() == 0  # synthetic: generated in the trainer process
    assert readers("--dataset_path", str(npy)) == 0  # one-hot .npy: a memory-map slice
    # multi-hot drawn on the fly: expanding to MLPerf's 214 ids a sample costs ~31 ms a 4,096
    # batch a core; a p5.48xlarge rank (24 cores) gets 8 readers (~3.9 ms a batch, under an
    # H100 step's 8.3 ms), not 2 (15 ms: input-bound 1.9x); every spare core on smaller ones.
    assert readers("--dataset_path", str(npy), *multi_hot, cores=24) == MULTI_HOT_READERS == 8
    assert readers("--dataset_path", str(npy), *multi_hot, cores=12) == 8
    assert readers("--dataset_path", str(npy), *multi_hot, cores=6) == 4
    assert readers("--dataset_path", str(npy), *multi_hot, cores=3) == 1
    assert readers("--dataset_path", str(npy), *multi_hot, cores=2) == 0  # a 2-core laptop
    assert readers("--dataset_path", str(npy), *multi_hot, "--data_workers", "2", cores=24) == 2
    assert readers("--dataset_path", str(npz)) == 0  # MLPerf multi-hot: memory-mapped too
    assert readers("--dataset_path", str(tsv)) == READERS == 2  # parsing: reader processes
    # ... where the rank has a core per reader beside its own: not on a 2-core laptop.
    assert readers("--dataset_path", str(tsv), cores=READERS) == 0
    assert readers("--dataset_path", str(tsv), cores=READERS + 1) == READERS
    assert readers("--dataset_path", str(npy), "--data_workers", "3") == 3
    assert readers("--dataset_path", str(tsv), "--data_workers", "0") == 0


def test_a_p5_rank_draws_on_the_fly_multi_hot_with_8_readers_from_its_24_cores(tmp_path, monkeypatch):
    """cores_per_rank reads the process's CPU affinity shared by torchrun's LOCAL_WORLD_SIZE: a
    p5.48xlarge pod sees 192 CPUs for 8 ranks, 24 each, and gets 8 readers a rank, not 2."""
    from trainer.data import loader

    folder = tmp_path / "npy"
    folder.mkdir()
    for part in ("dense.npy", "sparse.npy", "labels.npy"):
        (folder / f"day_0_{part}").touch()
    monkeypatch.setattr(loader.os, "sched_getaffinity", lambda pid: set(range(192)))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    assert loader.cores_per_rank() == 24
    cfg = parse_config(["--dataset_path", str(folder), "--multi_hot_sizes", ",".join(["2"] * 26)])
    assert loader.readers_for(cfg, make_source(cfg, 0, 1, cfg.batch_size)) == 8


def test_readers_get_the_tsv_line_index_from_the_trainer_instead_of_rescanning(tmp_path, monkeypatch):
    import pickle

    from trainer.data import criteo
    from trainer.data.batch import unpack
    from trainer.data.loader import _Slices

    data = tmp_path / "train.txt"
    _write_tsv(data, 100)
    cfg = parse_config(["--dataset_path", str(data), "--batch_size", "8", "--num_embeddings", "50"])
    make_source(cfg, 0, 1, 8).warm("train")  # the trainer process indexes the file once
    sent = pickle.dumps(_Slices(cfg, 0, 1, 8, "train", 0, 0, 2))
    # A reader process: nothing cached, no sidecar (read-only data), and it may not scan.
    monkeypatch.setattr(criteo.LineIndex, "_cache", {})
    (tmp_path / "train.txt.lineindex.npy").unlink()
    monkeypatch.setattr(criteo, "_scan_lines", lambda path: pytest.fail(f"rescanned {path}"))
    read = list(pickle.loads(sent))
    assert [len(unpack(buffer).labels) for buffer, _ in read] == [8, 8]
