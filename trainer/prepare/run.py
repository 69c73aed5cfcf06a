"""The three passes in order, each task skipped when its saved result still holds; layout.json last.

Work files live in ``<output>/.prepare/`` (scan/, vocab/, done/, multi_hot/); they make a
rerun cheap and can be deleted once layout.json exists (the multi-hot lookup tables, the
largest, are deleted by the run itself).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Callable, Iterator, List, Optional, Tuple

from trainer.config import NUM_SPARSE_FEATURES

from trainer.prepare import multi_hot, scan, shuffle, source, status, vocab, write
from trainer.prepare.cli import Options
from trainer.prepare.jsonfile import write_json

from trainer.data.layout import LAYOUT_FILE as LAYOUT
FORMATS = {"criteo_1tb": "criteo-1tb-npy", "criteo_kaggle": "criteo-kaggle-npy"}


def say(text: str) -> None:
    print(f"prepare: {text}", flush=True)


class Workers:
    """Runs tasks in this process for one worker, else in one pool of ``workers`` spawned
    processes kept for all passes. Spawned, not forked: a fork copies whatever locks the
    parent's other threads hold at that instant (fsspec's event loop, botocore's pools, a
    test's emulator client), and a child that needs one waits for ever. A spawned worker
    starts a clean interpreter with the parent's environment and imports only
    ``trainer.prepare`` (0.3 s here: no torch), once for the whole run."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.pool: ProcessPoolExecutor | None = None

    def run(self, fn: Callable, calls: List[tuple]) -> Iterator[dict]:
        """Results of ``fn(*call)`` as they finish."""
        if self.workers == 1 or len(calls) <= 1:
            for call in calls:
                yield fn(*call)
            return
        if self.pool is None:
            self.pool = ProcessPoolExecutor(max_workers=self.workers,
                                            mp_context=multiprocessing.get_context("spawn"))
        for future in as_completed([self.pool.submit(fn, *call) for call in calls]):
            yield future.result()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)


def _rate(result: dict) -> str:
    if result.get("skipped"):
        return "skipped (done before)"
    seconds = max(result["seconds"], 1e-9)
    return (f"{result['seconds'] / 60:.1f} min, {result['rows'] / seconds:,.0f} rows/s, "
            f"worker peak {result['peak_rss_mib']:,} MiB")


def prepare(opts: Options, found: Optional[Tuple[str, List[source.RawFile]]] = None) -> dict:
    """Run every pass; ``found`` is ``source.find``'s answer when the caller has it already."""
    workers = Workers(opts.workers)
    try:
        return _prepare(opts, found or source.find(opts.source, opts.dataset, opts.days), workers)
    finally:
        workers.close()


def _prepare(opts: Options, found: Tuple[str, List[source.RawFile]], workers: Workers) -> dict:
    dataset, files = found
    work = os.path.join(opts.output, ".prepare")
    os.makedirs(work, exist_ok=True)
    layout_path = os.path.join(opts.output, LAYOUT)
    if os.path.exists(layout_path):
        os.remove(layout_path)  # rewritten only when this run completes
    n = len(files)
    say(f"{dataset}: {n} file(s) from {opts.source} -> {opts.output}, {opts.workers} worker(s)")

    for i, result in enumerate(workers.run(scan.run, [(f, work) for f in files]), 1):
        say(f"scan {i}/{n} {result['prefix']}: {result['rows']:,} rows, {_rate(result)}")

    scans = [scan.path(work, f.prefix) for f in files]
    vocab_settings = {"files": [[f.prefix, scan.load_meta(p)[3]] for f, p in zip(files, scans)],
                      "frequency_threshold": opts.frequency_threshold}
    sizes = _vocabulary(work, scans, vocab_settings, workers)
    table_rows = vocab.table_sizes(sizes, opts.max_ind_range, opts.num_embeddings_per_feature)

    shuffled = opts.shuffle_seed is not None and dataset == "criteo_1tb" and n >= 2
    # Shuffled: the days are written one-hot, shuffled, and only then made multi-hot (MLPerf
    # materializes its multi-hot days from the shuffled ones). The training days keep their
    # contiguous ids unhashed until the shuffle's float32 round trip, as the reference's do:
    # it rounds the uncapped ids (45,000,001 -> 45,000,000) and hashes them only when read
    # (45,000,000 % 40M = 5,000,000; hashing first would give 5,000,001).
    day_multi_hot = opts.multi_hot_sizes if not shuffled else None
    write_settings = {"vocab": vocab_settings, "hashes": table_rows,
                      "multi_hot_sizes": day_multi_hot,
                      "multi_hot_distribution_type": opts.multi_hot_distribution_type if day_multi_hot else None}
    day_settings = {f.prefix: _day_settings(write_settings, f, unhashed=shuffled and f is not files[-1])
                    for f in files}
    todo = [f for f in files if write.is_done(work, opts.output, f.prefix, day_settings[f.prefix]) is None]
    tables = None
    if day_multi_hot and todo:
        start = time.monotonic()
        tables = multi_hot.make_tables(work, opts.multi_hot_sizes, table_rows, opts.multi_hot_distribution_type)
        say(f"multi-hot lookup tables ready ({(time.monotonic() - start) / 60:.1f} min)")
    calls = [(f, work, opts.output, day_settings[f.prefix], tables, table_rows) for f in files]
    rows = {}
    for i, result in enumerate(workers.run(write.run, calls), 1):
        rows[result["prefix"]] = result["rows"]
        say(f"day {i}/{n} {result['prefix']} done, {result['rows']:,} rows, {_rate(result)}")
    if shuffled:
        if todo:
            shuffle.forget(work)  # a day was (re)written unshuffled
        _shuffle(opts, work, files, rows, table_rows, workers)
    shutil.rmtree(os.path.join(work, "multi_hot"), ignore_errors=True)

    layout = {
        "format": FORMATS[dataset],
        "days": [int(f.prefix.split("_")[1]) for f in files] if dataset == "criteo_1tb" else None,
        "rows": [rows[f.prefix] for f in files],
        "num_embeddings_per_feature": table_rows,
        "multi_hot_sizes": opts.multi_hot_sizes,
        "multi_hot_distribution_type": opts.multi_hot_distribution_type if opts.multi_hot_sizes else None,
        "shuffle_seed": opts.shuffle_seed if shuffled else None,
        "frequency_threshold": opts.frequency_threshold,
        "max_ind_range": opts.max_ind_range,
        "source": opts.source,
        "run_id": status.run_id(),  # the Job that wrote it (trainer/prepare/status.py)
        "version": 1,
    }
    write_json(layout_path, layout, indent=1)
    say(f"{LAYOUT} written: {sum(layout['rows']):,} rows, num_embeddings_per_feature="
        f"{','.join(map(str, table_rows))}")
    return layout


def _shuffle(opts: Options, work: str, files: List[source.RawFile], rows: dict,
             table_rows: List[int], workers: Workers) -> None:
    """Pass 4: the training days (all but the last) shuffled together (shuffle.py); then, with
    --multi_hot_sizes, every day's multi-hot .npz from its shuffled one-hot ids."""
    train = files[:-1]
    start = time.monotonic()
    now = shuffle.shuffle(work, [os.path.join(opts.output, f.prefix) for f in train],
                          [rows[f.prefix] for f in train], opts.shuffle_seed, run=workers.run,
                          hashes=table_rows)
    say(f"shuffle of {len(train)} days: " + (f"{(time.monotonic() - start) / 60:.1f} min" if now
                                             else "skipped (done before)"))
    if not opts.multi_hot_sizes:
        return
    settings = {"sizes": opts.multi_hot_sizes, "rows": table_rows,
                "distribution": opts.multi_hot_distribution_type, "shuffle_seed": opts.shuffle_seed,
                "version": 2}  # 2: ids hashed after the shuffle's round trip
    done = os.path.join(work, "shuffle", "multi_hot.json")
    if not now and os.path.exists(done) and json.load(open(done)) == settings:
        return
    start = time.monotonic()
    tables = multi_hot.make_tables(work, opts.multi_hot_sizes, table_rows, opts.multi_hot_distribution_type)
    say(f"multi-hot lookup tables ready ({(time.monotonic() - start) / 60:.1f} min)")
    calls = [(os.path.join(opts.output, f.prefix), tables, opts.multi_hot_sizes, table_rows) for f in files]
    for i, result in enumerate(workers.run(multi_hot.write_day_of, calls), 1):  # --workers at a time
        say(f"multi-hot {i}/{len(files)} {result['prefix']}: {result['rows']:,} rows, {_rate(result)}")
    write_json(done, settings)


def _day_settings(settings: dict, raw: source.RawFile, unhashed: bool = False) -> dict:
    """One day's write settings; ``unhashed``: a training day the shuffle hashes afterwards."""
    return {**settings, "source_size": raw.size, **({"hashes": None} if unhashed else {})}


def _vocabulary(work: str, scans: List[str], settings: dict, workers: Workers) -> List[int]:
    """Table sizes (before --max_ind_range), rebuilding the vocabulary if its inputs changed."""
    meta_path = os.path.join(work, "vocab", "vocab.json")
    try:
        with open(meta_path) as fh:
            saved = json.load(fh)
        if saved["settings"] == settings:
            say("vocabulary: skipped (built before from the same days and threshold)")
            return saved["sizes"]
    except (OSError, ValueError, KeyError):
        pass
    if os.path.exists(meta_path):
        os.remove(meta_path)
    sizes = [0] * NUM_SPARSE_FEATURES
    calls = [(k, scans, settings["frequency_threshold"], work) for k in range(NUM_SPARSE_FEATURES)]
    for i, result in enumerate(workers.run(vocab.build_column, calls), 1):
        sizes[result["column"]] = result["size"]
        say(f"vocabulary {i}/{NUM_SPARSE_FEATURES} column {result['column']}: {result['distinct']:,} "
            f"distinct ids, table {result['size']:,}, worker peak {result['peak_rss_mib']:,} MiB")
    write_json(meta_path, {"settings": settings, "sizes": sizes})
    return sizes
