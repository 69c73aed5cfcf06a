"""Criteo click logs: the raw TSV format and TorchRec's preprocessed ``.npy`` format.

TSV: ``label \\t 13 integers \\t 26 hex ids`` per line, empty fields allowed (Kaggle
``train.txt`` and the 1TB ``day_<i>`` files). NPY: ``day_<i>_{dense,sparse,labels}.npy``
as written by ``torchrec.datasets.criteo`` (dense already log-transformed).

Samples are numbered globally: sample ``i`` of an epoch is line (or row) ``i`` of the
concatenated files, whatever the world size. Global batch ``s`` is samples
``[s*G, (s+1)*G)`` and rank ``r`` reads only its contiguous slice of it, so N ranks on a
shared file system read the data once between them and a resume on another world size
neither repeats nor skips a sample. A position is reached without parsing what comes
before it: ``.npy`` days are memory-mapped and sliced; TSV files are seeked to through a
``LineIndex``. Epochs end at the last complete global batch.

Ids are hashed into the table sizes. Malformed rows are dropped from their batch (which is
then shorter on that rank; TorchRec's all-to-all carries per-rank batch sizes) and
counted; the count is reported in the metrics, and the first few are logged with file
and line.

Held-out data, the standard split: with two or more day files (Criteo 1TB: days 0-22
train) the last day's first half (``len // 2 + len % 2`` rows) is the validation set and its
second half the test set, as torchrec's ``InMemoryBinaryCriteoIterDataPipe`` stages "val" and
"test" cut day 23 (torchrec 1.8.0 datasets/criteo.py). With a single file (Kaggle
``train.txt`` or ``train_*.npy``) every ``HOLDOUT_EVERY``-th line (lines 9, 19, ...) is
validation, the rest training samples, and there is no test set.
"""

from __future__ import annotations

import glob
import itertools
import logging
import os
import re
import threading
from typing import BinaryIO, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np
from torchrec.datasets.utils import Batch

from trainer.config import NUM_DENSE_FEATURES, NUM_SPARSE_FEATURES
from trainer.data.batch import BatchTensors, Sparse, assemble, batch_tensors, pad_rows
from trainer.data.multi_hot import MultiHot, open_npz_members
from trainer.data.stream import first_step
from trainer.data.tsv_parse import dense_minimum, parse_block

log = logging.getLogger(__name__)

HOLDOUT_EVERY = 10
INDEX_STRIDE = 1024  # the line index keeps the byte offset of every 1024th line
INDEX_VERSION = 2  # sidecar format: 2 added the dense minimum
HEADER = 6  # sidecar: size, mtime, stride, lines, dense minimum, version; then the offsets
SCAN_BYTES = 1 << 24
TSV_COLUMNS = 1 + NUM_DENSE_FEATURES + NUM_SPARSE_FEATURES
Rows = Tuple[np.ndarray, Sparse, np.ndarray]  # dense [n,13] f32, ids (one- or multi-hot), labels [n]


def _natural_key(path: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", os.path.basename(path))]


def discover(path: str) -> Tuple[str, List[str]]:
    """Return (format, files): 'npy' or 'npz' (multi-hot) with day prefixes, or 'tsv' with
    file paths."""
    if os.path.isfile(path):
        return "tsv", [path]
    dense = sorted(glob.glob(os.path.join(path, "day_*_dense.npy")), key=_natural_key)
    if not dense:  # torchrec's Kaggle preprocessing: train_{dense,sparse,labels}.npy
        dense = glob.glob(os.path.join(path, "train_dense.npy"))
    if dense:
        prefixes = [d[: -len("_dense.npy")] for d in dense]
        if all(os.path.exists(f"{p}_sparse_multi_hot.npz") for p in prefixes):
            return "npz", prefixes  # MLPerf DLRM-DCNv2's materialised multi-hot days
        return "npy", prefixes
    files = sorted(
        (p for p in glob.glob(os.path.join(path, "*"))
         if os.path.isfile(p) and not p.endswith((".npy", ".md", ".json"))),
        key=_natural_key,
    )
    if not files:
        raise ValueError(f"--dataset_path={path!r}: no Criteo TSV files or day_<i>_*.npy files found")
    return "tsv", files


# --- TSV line index ---

class LineIndex:
    """Line count and the byte offset of every ``INDEX_STRIDE``-th line of a TSV file.

    A resume (or a rank's next slice) seeks to line ``n`` by jumping to the offset of line
    ``n - n % INDEX_STRIDE`` and skipping fewer than ``INDEX_STRIDE`` lines unparsed, so
    consumed rows are never parsed again. Built by one newline scan (numpy, no parsing) and
    kept per process and beside the file (``<file>.lineindex.npy``, when writable), keyed
    by the file's size and mtime, so each file is scanned once, not on every resume."""

    _cache: Dict[Tuple[str, int, int], "LineIndex"] = {}
    _lock = threading.Lock()

    def __init__(self, lines: int, offsets: np.ndarray, dense_min: int) -> None:
        self.lines = lines
        self.offsets = offsets
        self.dense_min = dense_min  # of the whole file: torchrec's transform needs it

    @classmethod
    def of(cls, path: str) -> "LineIndex":
        stat = os.stat(path)
        key = (os.path.abspath(path), stat.st_size, stat.st_mtime_ns)
        with cls._lock:
            found = cls._cache.get(key)
            if found is None:
                found = cls._load(path, key) or cls._build(path, key)
                cls._cache[key] = found
        return found

    @classmethod
    def known(cls) -> Dict[Tuple[str, int, int], "LineIndex"]:
        """This process's indexes, to hand to reader processes (a few MB for 1TB days): they
        need not rescan a file whose sidecar could not be written (read-only data)."""
        with cls._lock:
            return dict(cls._cache)

    @classmethod
    def adopt(cls, indexes: Dict[Tuple[str, int, int], "LineIndex"]) -> None:
        with cls._lock:
            cls._cache.update(indexes)

    @staticmethod
    def _sidecar(path: str) -> str:
        return path + ".lineindex.npy"

    @classmethod
    def _load(cls, path: str, key: Tuple[str, int, int]) -> Optional["LineIndex"]:
        try:
            saved = np.load(cls._sidecar(path))
        except (OSError, ValueError):
            return None
        header = [int(v) for v in saved[:HEADER]]
        if len(header) < HEADER or header[:3] + header[5:] != [key[1], key[2], INDEX_STRIDE,
                                                               INDEX_VERSION]:
            return None  # the file changed (or the stride or the format did): rebuild
        return cls(header[3], saved[HEADER:], header[4])

    @classmethod
    def _build(cls, path: str, key: Tuple[str, int, int]) -> "LineIndex":
        lines, offsets, dense_min = _scan_lines(path)
        index = cls(lines, offsets, dense_min)
        header = np.array([key[1], key[2], INDEX_STRIDE, lines, dense_min, INDEX_VERSION],
                          dtype=np.int64)
        tmp = f"{cls._sidecar(path)}.{os.getpid()}.tmp.npy"
        try:  # several ranks may write it at once: each renames a complete file over it
            np.save(tmp, np.concatenate([header, offsets]))
            os.replace(tmp, cls._sidecar(path))
        except OSError:
            pass  # a read-only dataset: the in-process copy is enough
        return index


def _scan_lines(path: str) -> Tuple[int, np.ndarray, int]:
    """(line count, byte offsets of lines 0, STRIDE, 2*STRIDE, ..., least integer feature)
    from one pass: newlines counted in numpy, each chunk's whole lines parsed for the minimum."""
    kept = [np.zeros(1, dtype=np.int64)]
    lines, base, last, carry = 0, 0, b"\n", b""
    least: Optional[int] = None
    with open(path, "rb") as fh:
        while chunk := fh.read(SCAN_BYTES):
            starts = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10) + base + 1
            numbers = np.arange(lines + 1, lines + 1 + len(starts))  # line that starts there
            kept.append(starts[numbers % INDEX_STRIDE == 0].astype(np.int64))
            lines += len(starts)
            base += len(chunk)
            last = chunk[-1:]
            whole, _, carry = (carry + chunk).rpartition(b"\n")
            least = _least(least, dense_minimum(whole + b"\n") if whole else None)
    if last != b"\n":
        lines += 1  # a last line without a newline
    least = _least(least, dense_minimum(carry) if carry else None)
    offsets = np.concatenate(kept)
    offsets = offsets[: (lines + INDEX_STRIDE - 1) // INDEX_STRIDE] if lines else offsets[:0]
    return lines, offsets, 0 if least is None else least


def _least(a: Optional[int], b: Optional[int]) -> Optional[int]:
    return b if a is None else a if b is None else min(a, b)


def torchrec_dense(ints: np.ndarray, file_min: int) -> np.ndarray:
    """torchrec's dense transform (torchrec 1.8.0 datasets/criteo.py, tsv_to_npys:
    ``dense -= dense.min() - 2; np.log(dense, dtype=np.float32)``, the minimum over the whole
    file), so TSV and torchrec's .npy of the same file give the same tensors."""
    return np.log((ints - (file_min - 2)).astype(np.int32), dtype=np.float32)


class _TsvCursor:
    """Open TSV files of one stream, each with the number of the line read next."""

    def __init__(self) -> None:
        self.files: Dict[str, Tuple[BinaryIO, int]] = {}

    def seek(self, path: str, line: int) -> BinaryIO:
        fh, at = self.files.get(path, (None, 0))
        if fh is None:
            fh = open(path, "rb")  # at line 0
        if not 0 <= line - at < INDEX_STRIDE:  # far (or behind): jump through the index
            at = line - line % INDEX_STRIDE
            fh.seek(int(LineIndex.of(path).offsets[at // INDEX_STRIDE]))
        for _ in range(line - at):
            fh.readline()
        self.files[path] = (fh, line)
        return fh

    def advanced(self, path: str, lines: int) -> None:
        fh, at = self.files[path]
        self.files[path] = (fh, at + lines)

    def close(self) -> None:
        for fh, _ in self.files.values():
            fh.close()
        self.files.clear()


def _parse_tsv_line(line: bytes) -> Tuple[int, List[int], List[int]]:
    """(label, 13 counts, 26 ids); ValueError saying what is wrong."""
    cols = line.rstrip(b"\r\n").split(b"\t")
    if len(cols) != TSV_COLUMNS:
        raise ValueError(f"{len(cols)} columns, expected {TSV_COLUMNS}")
    label = int(cols[0])
    if label not in (0, 1):
        raise ValueError(f"label {cols[0]!r} is not 0 or 1")
    ints = [int(c) if c else 0 for c in cols[1 : 1 + NUM_DENSE_FEATURES]]
    cats = [int(c, 16) if c else 0 for c in cols[1 + NUM_DENSE_FEATURES :]]
    return label, ints, cats


# --- which lines are which samples ---

def _samples_in(lines: int, part: Optional[str]) -> int:
    """Samples of a file with ``lines`` lines (rows) for a part: None (all), 'train' or
    'holdout' (every HOLDOUT_EVERY-th line of a single file), 'val' or 'test' (the last
    day's first or second half)."""
    held = lines // HOLDOUT_EVERY
    first_half = lines // 2 + lines % 2
    return {None: lines, "train": lines - held, "holdout": held, "val": first_half,
            "test": lines - first_half}[part]


def _lines_of(part: Optional[str], first: int, stop: int, lines: int) -> np.ndarray:
    """Line numbers in a file of ``lines`` lines of its samples ``[first, stop)`` of a part."""
    t = np.arange(first, stop, dtype=np.int64)
    if part == "train":  # lines 0..8, 10..18, ...: the 9 of every 10 not held out
        return HOLDOUT_EVERY * (t // (HOLDOUT_EVERY - 1)) + t % (HOLDOUT_EVERY - 1)
    if part == "holdout":
        return HOLDOUT_EVERY * t + HOLDOUT_EVERY - 1
    if part == "test":
        return t + lines // 2 + lines % 2
    return t


class _Layout:
    """Which file holds global sample ``i`` of a part. Files' sample counts are learnt in
    order and only as far as needed, so a run near the start touches only the first files."""

    def __init__(self, files: List[str], count: Callable[[str], int]) -> None:
        self.files = files
        self.count = count
        self.starts = [0]  # starts[j] = first sample of file j; one more entry per known file

    def covers(self, stop: int) -> bool:
        """Whether samples ``[0, stop)`` exist."""
        while self.starts[-1] < stop and len(self.starts) <= len(self.files):
            self.starts.append(self.starts[-1] + self.count(self.files[len(self.starts) - 1]))
        return self.starts[-1] >= stop

    def pieces(self, first: int, stop: int) -> Iterator[Tuple[str, int, int]]:
        """(file, first, stop) in file-local sample numbers for global ``[first, stop)``."""
        for j, path in enumerate(self.files[: len(self.starts) - 1]):
            lo, hi = max(first, self.starts[j]), min(stop, self.starts[j + 1])
            if lo < hi:
                yield path, lo - self.starts[j], hi - self.starts[j]


def _joined(parts: List[np.ndarray]) -> np.ndarray:
    """One array of the parts; a single part is kept as it is (no copy)."""
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


class CriteoSource:
    """This rank's share of each global batch of Criteo files; see the module docstring."""

    def __init__(self, path: str, table_sizes: List[int], batch_size: int, rank: int,
                 world_size: int, multi_hot: Optional[MultiHot] = None) -> None:
        self.format, self.files = discover(path)
        if multi_hot is not None and self.format == "npz":
            raise ValueError(f"--multi_hot_sizes: {path} is already multi-hot (MLPerf's "
                             "day_<i>_sparse_multi_hot.npz); drop the flag to read it as it is")
        self.multi_hot = multi_hot
        # int32 ids stay int32 through the modulo (the reference's dtype, trainer/data/batch.py)
        self.hashes = np.asarray(table_sizes, dtype=np.int32 if max(table_sizes) < 2**31 else np.int64)
        self.batch_size = batch_size
        self.rank = rank
        self.world_size = world_size
        self.global_batch = batch_size * world_size
        self.malformed_rows = 0
        self._logged = 0
        self._days: Dict[str, Tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._indexes: Dict[str, LineIndex] = {}
        self._test: Optional[Tuple[List[str], Optional[str]]] = None
        if len(self.files) >= 2:
            self._train = (self.files[:-1], None)
            self._eval: Tuple[List[str], Optional[str]] = (self.files[-1:], "val")
            self._test = (self.files[-1:], "test")
        else:
            self._train = (self.files, "train")
            self._eval = (self.files, "holdout")

    # --- public stream API (shared with SyntheticSource) ---
    def train_batches(self, epoch: int, first_sample: int) -> Iterator[Batch]:
        return map(assemble, self.tensors("train", epoch, first_step(first_sample, self.global_batch)))

    def eval_batches(self, count: Optional[int]) -> Iterator[Batch]:
        return map(assemble, self.tensors("val", 0, 0, count))

    def test_batches(self, count: Optional[int]) -> Iterator[Batch]:
        """The test set's first ``count`` global batches; none without a test set."""
        return map(assemble, self.tensors("test", 0, 0, count))

    def train_samples(self) -> int:
        """Samples of one training epoch (every day file's header or line index is read)."""
        files, part = self._train
        return sum(_samples_in(self._rows_in(f), part) for f in files)

    def tensors(self, split: str, epoch: int, first: int, stop: Optional[int] = None,
                stride: int = 1) -> Iterator[BatchTensors]:
        """This rank's slices of global batches ``first, first + stride, ...`` (below ``stop``)
        of ``split`` while they are complete: what one of ``stride`` reader processes builds."""
        del epoch  # one pass per epoch, same order: Criteo is usually trained unshuffled
        part = {"train": self._train, "val": self._eval, "test": self._test}[split]
        return self._batches(*part, first, stop, stride, split != "train") if part else iter(())

    def warm(self, split: str) -> None:
        """Index the split's first TSV file here, before reader processes start: one scan,
        handed to them (``LineIndex.known``), instead of one per reader."""
        part = {"train": self._train, "val": self._eval, "test": self._test}[split]
        if self.format == "tsv" and part:
            LineIndex.of(part[0][0])

    # --- internals ---
    def _batches(self, files: List[str], holdout: Optional[str], first: int,
                 stop: Optional[int], stride: int, pad_last: bool = False) -> Iterator[BatchTensors]:
        """Complete global batches; with ``pad_last`` (held-out data: every sample is scored)
        also the last, partial one, each rank's slice padded to the per-rank batch with rows
        labelled -1 (``pad_rows``), which the evaluation drops after the forward."""
        layout = _Layout(files, lambda f: _samples_in(self._rows_in(f), holdout))
        cursor = _TsvCursor()
        step = first
        try:
            while stop is None or step < stop:
                if not layout.covers((step + 1) * self.global_batch):
                    end = layout.starts[-1]  # every file is known now: the part's size
                    if not (pad_last and end > step * self.global_batch):
                        return
                else:
                    end = (step + 1) * self.global_batch
                lo = step * self.global_batch + self.rank * self.batch_size
                hi = min(lo + self.batch_size, end)
                parts = [self._read(path, _lines_of(holdout, a, b, self._rows_in(path)), cursor)
                         for path, a, b in layout.pieces(lo, hi)] if hi > lo else []
                if parts:
                    dense, labels = (_joined([p[i] for p in parts]) for i in (0, 2))
                    if not len(labels):
                        raise RuntimeError(f"global samples {lo}..{hi - 1} of {files} are all "
                                           "malformed: the data is damaged")
                    if self.format == "npz":  # 26 arrays [n, size_k], each hashed into its table
                        sparse: Sparse = [_joined([p[1][k] for p in parts]) % self.hashes[k]
                                          for k in range(NUM_SPARSE_FEATURES)]
                    else:
                        ids = _joined([p[1] for p in parts]) % self.hashes
                        sparse = self.multi_hot.expand(ids) if self.multi_hot else ids
                else:  # this rank's slice lies past the end: all padding
                    dense = np.zeros((0, NUM_DENSE_FEATURES), dtype=np.float32)
                    labels = np.zeros(0, dtype=np.float32)
                    sparse = self._no_ids()
                if hi - lo < self.batch_size:
                    dense, sparse, labels = pad_rows(dense, sparse, labels, self.batch_size)
                yield batch_tensors(dense, sparse, labels)
                step += stride
        finally:
            cursor.close()

    def _no_ids(self) -> Sparse:
        """Zero samples' ids in this source's shape (one-hot [0, 26] or 26 x [0, size_k])."""
        if self.format == "npz":
            members = self._day(self.files[-1])[1]
            return [np.zeros((0, m.shape[1] if m.ndim > 1 else 1), dtype=np.int64) for m in members]
        ids = np.zeros((0, NUM_SPARSE_FEATURES), dtype=np.int64)
        return self.multi_hot.expand(ids) if self.multi_hot else ids

    def _rows_in(self, path: str) -> int:
        if self.format in ("npy", "npz"):
            return len(self._day(path)[2])
        return self._index(path).lines

    def _index(self, path: str) -> LineIndex:
        """The file's line index, looked up once per source (LineIndex.of stats the file,
        a metadata call on a shared file system: not one per batch)."""
        if path not in self._indexes:
            self._indexes[path] = LineIndex.of(path)
        return self._indexes[path]

    def _day(self, prefix: str) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(dense, sparse, labels) of one day, memory-mapped once per process."""
        if prefix not in self._days:
            arrays = tuple(np.load(f"{prefix}_{part}.npy", mmap_mode="r")
                           if part != "sparse" or self.format == "npy"
                           else open_npz_members(f"{prefix}_sparse_multi_hot.npz")
                           for part in ("dense", "sparse", "labels"))
            sparse_rows = {len(m) for m in arrays[1]} if self.format == "npz" else {len(arrays[1])}
            if len(arrays[0]) != len(arrays[2]) or sparse_rows != {len(arrays[2])}:
                raise ValueError(f"{prefix}_*.npy: dense, sparse and labels have different row counts")
            self._days[prefix] = arrays  # type: ignore[assignment]
        return self._days[prefix]

    def _read(self, path: str, lines: np.ndarray, cursor: _TsvCursor) -> Rows:
        if self.format in ("npy", "npz"):
            return self._mapped_rows(path, lines)
        return self._tsv_rows(path, lines, cursor)

    def _report(self, where: str, why: str) -> None:
        self.malformed_rows += 1
        if self._logged < 5:
            self._logged += 1
            log.warning("skipping malformed Criteo row at %s: %s", where, why)

    def _tsv_rows(self, path: str, lines: np.ndarray, cursor: _TsvCursor) -> Rows:
        """Parse the given lines (ascending) of one file as one block (trainer/data/
        tsv_parse.py); lines between them are read but not kept."""
        first, last = int(lines[0]), int(lines[-1])
        fh = cursor.seek(path, first)
        block = b"".join(itertools.islice(fh, last + 1 - first))
        cursor.advanced(path, last + 1 - first)
        parsed = parse_block(block)
        wanted = lines - first
        good = parsed.ok[wanted]
        if not good.all():
            texts = block.splitlines(keepends=True)
            for offset in wanted[~good]:
                try:
                    _parse_tsv_line(texts[offset])
                    why = "a field its column does not allow"
                except ValueError as err:
                    why = str(err)
                self._report(f"{path} line {first + int(offset) + 1}", why)
        rows = (np.cumsum(parsed.ok) - 1)[wanted[good]]
        dense = torchrec_dense(parsed.ints[rows], self._index(path).dense_min)
        return dense, parsed.ids[rows], parsed.labels[rows].astype(np.float32)

    def _mapped_rows(self, prefix: str, lines: np.ndarray) -> Rows:
        """The given rows of one preprocessed day, torchrec's one-hot ``.npy`` or MLPerf's
        multi-hot members: memory-mapped slices, constant time in the position, one copy of
        just the rows this rank needs."""
        dense, sparse, labels = self._day(prefix)
        columns = sparse if self.format == "npz" else [sparse]
        lo, hi, take = _span(lines)
        y = _rows(labels, lo, hi, take, np.float32).reshape(-1)
        d = _rows(dense, lo, hi, take, np.float32).reshape(len(y), -1)
        # int32 or int64 as stored: hashed (int32 for tables below 2**31 rows) later.
        s = [_rows(c, lo, hi, take, None).reshape(len(y), -1) for c in columns]
        sparse_columns = len(s) if self.format == "npz" else s[0].shape[1]
        if d.shape[1] != NUM_DENSE_FEATURES or sparse_columns != NUM_SPARSE_FEATURES:
            raise ValueError(f"{prefix}_*.npy: expected {NUM_DENSE_FEATURES} dense and "
                             f"{NUM_SPARSE_FEATURES} sparse columns, got {d.shape[1]} and {sparse_columns}")
        ok = np.isfinite(d).all(axis=1) & ((y == 0) | (y == 1))
        for ids in s:
            ok &= (ids >= 0).all(axis=1)
        if not ok.all():
            for bad in np.flatnonzero(~ok):
                self._report(f"{prefix} row {int(lines[bad])}",
                             "label not 0/1, non-finite dense or negative id")
            d, y, s = d[ok], y[ok], [ids[ok] for ids in s]
        return d, s if self.format == "npz" else s[0], y


def _span(lines: np.ndarray) -> Tuple[int, int, Optional[np.ndarray]]:
    """(first row, end row, which rows of that span to take; None = all of them)."""
    lo, hi = int(lines[0]), int(lines[-1]) + 1
    return lo, hi, None if hi - lo == len(lines) else lines - lo


def _rows(mapped: np.ndarray, lo: int, hi: int, take: Optional[np.ndarray],
          dtype: Optional[type]) -> np.ndarray:
    """Rows ``[lo, hi)`` (``take`` of them) of a memory-mapped array, read once: only the rows
    this rank needs leave the page cache, with a single copy into a private array."""
    span = mapped[lo:hi] if take is None else mapped[lo:hi][take]
    return np.array(span, dtype=dtype or span.dtype, copy=True)
