"""Pass 3, one day: the files the trainer reads, streamed block by block.

Dtypes and shapes are those of torchrec 1.8.0 ``BinaryCriteoUtils.tsv_to_npys``
(torchrec/datasets/criteo.py): ``<prefix>_dense.npy`` float32 ``[n, 13]`` (integers as int32,
missing = 0, ``x - file_min + 2`` then ``np.log(..., dtype=np.float32)``),
``<prefix>_labels.npy`` int32 ``[n, 1]``; ``<prefix>_sparse.npy`` holds the contiguous ids of
``vocab.py`` as int32 ``[n, 26]`` (torchrec keeps int64; every id here is below 2**31 and
half the size is 20 GB less per day; the trainer reads either), hashed into the tables
(``settings["hashes"]``) unless a shuffle hashes them later. With multi-hot sizes,
``<prefix>_sparse_multi_hot.npz`` follows (``multi_hot.py``).

Every file is written as ``.tmp`` and renamed; only then is ``<work>/done/<prefix>.json``
written, so a day with a marker is complete and any other is redone from the start.
"""

from __future__ import annotations

import json
import os
import time
import zipfile
from typing import Optional

import numpy as np

from trainer.config import NUM_DENSE_FEATURES, NUM_SPARSE_FEATURES
from trainer.data.tsv_parse import parse_block
from trainer.prepare import multi_hot, scan, source
from trainer.prepare.jsonfile import write_json
from trainer.prepare.npyio import NpyFile
from trainer.prepare.vocab import Mapping


def torchrec_dense(ints: np.ndarray, file_min: int) -> np.ndarray:
    """tsv_to_npys: ``dense_np = np.array(dense, dtype=np.int32); dense_np -= dense_np.min() - 2;
    np.log(dense_np, dtype=np.float32)``."""
    dense = ints.astype(np.int32)
    dense -= np.int32(file_min - 2)
    return np.log(dense, dtype=np.float32)


def marker(work: str, prefix: str) -> str:
    return os.path.join(work, "done", f"{prefix}.json")


def outputs(output: str, prefix: str, with_multi_hot: bool) -> list[str]:
    names = [f"{prefix}_{part}.npy" for part in ("dense", "sparse", "labels")]
    return [os.path.join(output, n) for n in names + ([f"{prefix}_sparse_multi_hot.npz"] if with_multi_hot else [])]


def is_done(work: str, output: str, prefix: str, settings: dict) -> Optional[int]:
    """The day's rows if its marker matches these settings and its files exist, else None."""
    try:
        with open(marker(work, prefix)) as fh:
            saved = json.load(fh)
    except (OSError, ValueError):
        return None
    if saved.get("settings") != settings:
        return None
    rows = int(saved["rows"])
    files = outputs(output, prefix, bool(settings.get("multi_hot_sizes")))
    return rows if all(_complete(p, rows) for p in files) else None


def _complete(path: str, rows: int) -> bool:
    """Whether a day file has its rows (an .npy whose data is all there, a zip whose central
    directory, written last, lists 26 members): a copy or a disk cut short is redone."""
    try:
        if path.endswith(".npz"):
            with zipfile.ZipFile(path) as archive:
                return len(archive.namelist()) == NUM_SPARSE_FEATURES
        return len(np.load(path, mmap_mode="r")) == rows
    except (OSError, ValueError, zipfile.BadZipFile):
        return False


def run(raw: source.RawFile, work: str, output: str, settings: dict,
        tables: Optional[str], table_rows: list[int]) -> dict:
    """Write one day unless done with these settings; a task for the pool."""
    start = time.monotonic()
    done = is_done(work, output, raw.prefix, settings)
    if done is not None:
        return {"prefix": raw.prefix, "rows": done, "skipped": True}
    if os.path.exists(marker(work, raw.prefix)):
        os.remove(marker(work, raw.prefix))
    rows, _, dense_min, _ = scan.load_meta(scan.path(work, raw.prefix))
    mapping = Mapping(work, NUM_SPARSE_FEATURES, settings["hashes"])
    dense_path, sparse_path, labels_path = outputs(output, raw.prefix, False)
    files = [NpyFile(dense_path, np.float32, (rows, NUM_DENSE_FEATURES)),
             NpyFile(sparse_path, np.int32, (rows, NUM_SPARSE_FEATURES)),
             NpyFile(labels_path, np.int32, (rows, 1))]
    for block in source.blocks(raw.url):
        parsed = parse_block(block)
        files[0].array.append(torchrec_dense(parsed.ints, dense_min))
        files[1].array.append(mapping.apply(parsed.ids))
        files[2].array.append(parsed.labels.astype(np.int32).reshape(-1, 1))
    for f in files:
        f.close()
    sizes = settings.get("multi_hot_sizes")
    if sizes:
        assert tables is not None
        multi_hot.write_day(outputs(output, raw.prefix, True)[3], np.load(files[1].tmp, mmap_mode="r"),
                            tables, sizes, table_rows)
    for f in files:
        f.commit()
    os.makedirs(os.path.dirname(marker(work, raw.prefix)), exist_ok=True)
    write_json(marker(work, raw.prefix), {"rows": rows, "settings": settings})
    seconds = time.monotonic() - start
    return {"prefix": raw.prefix, "rows": rows, "skipped": False, "seconds": seconds,
            "peak_rss_mib": scan.peak_rss_mib()}
