"""Criteo TSV rows parsed with numpy over the raw bytes: no Python per field.

One Python ``int(...)`` per field parsed about 70k rows/s per thread; here a block of lines is
split on its tab and newline bytes and every column is decoded at once (Horner's rule over
the columns' characters, one vectorised step per character position), so a block costs a
few dozen numpy operations whatever its length.

Values follow torchrec's ``BinaryCriteoUtils.tsv_to_npys`` (torchrec 1.8.0,
torchrec/datasets/criteo.py): an empty integer or id is 0; ids are hexadecimal. A line is
malformed when it has not 40 fields, a field has a character its column does not allow, a
number has more digits than ``MAX_DIGITS`` allows or the label is not 0 or 1 (torchrec would fail on it;
we drop and count it, trainer/data/criteo.py).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from trainer.config import NUM_DENSE_FEATURES, NUM_SPARSE_FEATURES

FIELDS = 1 + NUM_DENSE_FEATURES + NUM_SPARSE_FEATURES
# Longer numbers could overflow int64: malformed (Criteo's ids have 8 hex digits).
MAX_DIGITS = {10: 18, 16: 15}
TAB, NEWLINE, CR, MINUS = 9, 10, 13, 45

_DECIMAL = np.full(256, 255, dtype=np.uint8)
_DECIMAL[48:58] = np.arange(10)
_HEX = _DECIMAL.copy()
_HEX[97:103] = np.arange(10, 16)  # a-f
_HEX[65:71] = np.arange(10, 16)  # A-F


class Parsed(NamedTuple):
    """One block's lines: ``ok`` per line; labels/ints/ids only for the ok lines, in order."""

    ok: np.ndarray  # bool [lines]
    labels: np.ndarray  # int64 [ok lines]
    ints: np.ndarray  # int64 [ok lines, 13]
    ids: np.ndarray  # int64 [ok lines, 26]


def _decode(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, table: np.ndarray,
            base: int, signed: bool) -> tuple[np.ndarray, np.ndarray]:
    """(values, valid) of the fields ``buf[starts:starts+lengths]`` (any shape)."""
    values = np.zeros(starts.shape, dtype=np.int64)
    valid = lengths <= MAX_DIGITS[base] + signed
    negative = np.zeros(starts.shape, dtype=bool)
    if signed:
        first = buf[np.minimum(starts, len(buf) - 1)]
        negative = (first == MINUS) & (lengths > 1)
    begin = starts + negative
    count = lengths - negative
    for k in range(int(count.max(initial=0))):
        inside = count > k
        digit = table[buf[np.where(inside, begin + k, 0)]]
        valid &= ~inside | (digit != 255)
        values = np.where(inside, values * base + (digit & 15), values)
    return np.where(negative, -values, values), valid


def parse_lines(block: bytes) -> Parsed:
    """Parse ``block``: whole lines, each ending in a newline (the last may lack one)."""
    if not block:
        empty = np.zeros((0,), dtype=np.int64)
        return Parsed(np.zeros(0, dtype=bool), empty, empty.reshape(0, NUM_DENSE_FEATURES),
                      empty.reshape(0, NUM_SPARSE_FEATURES))
    if not block.endswith(b"\n"):
        block += b"\n"
    buf = np.frombuffer(block, dtype=np.uint8)
    newlines = np.flatnonzero(buf == NEWLINE)
    lines = len(newlines)
    line_starts = np.concatenate(([0], newlines[:-1] + 1))
    line_ends = newlines - (buf[np.maximum(newlines - 1, 0)] == CR)  # a CRLF file's \r
    tabs = np.flatnonzero(buf == TAB)
    per_line = np.bincount(np.searchsorted(newlines, tabs), minlength=lines)
    ok = per_line == FIELDS - 1
    rows = np.flatnonzero(ok)
    tab_rows = tabs[ok[np.searchsorted(newlines, tabs)]].reshape(-1, FIELDS - 1)
    starts = np.concatenate((line_starts[rows, None], tab_rows + 1), axis=1)
    ends = np.concatenate((tab_rows, line_ends[rows, None]), axis=1)
    lengths = ends - starts
    numbers, good_numbers = _decode(buf, starts[:, :1 + NUM_DENSE_FEATURES],
                                    lengths[:, :1 + NUM_DENSE_FEATURES], _DECIMAL, 10, True)
    ids, good_ids = _decode(buf, starts[:, 1 + NUM_DENSE_FEATURES:],
                            lengths[:, 1 + NUM_DENSE_FEATURES:], _HEX, 16, False)
    labels = numbers[:, 0]
    good = (good_numbers.all(axis=1) & good_ids.all(axis=1) & (lengths[:, 0] > 0)
            & ((labels == 0) | (labels == 1)))
    ok[rows] = good
    return Parsed(ok, labels[good], numbers[good, 1:], ids[good])


# --- the fast path: Apache Arrow's C++ CSV reader, ids decoded from its byte buffers ---------

_COLUMNS = [f"c{i}" for i in range(FIELDS)]
_TYPES = {name: (pa.int64() if i <= NUM_DENSE_FEATURES else pa.binary())
          for i, name in enumerate(_COLUMNS)}
# Criteo has no quoting; an empty line must stay a (malformed) line so numbering holds.
_PARSE_ARGS = dict(delimiter="\t", quote_char=False, double_quote=False, escape_char=False,
                   newlines_in_values=False, ignore_empty_lines=False)
_CONVERT = pacsv.ConvertOptions(column_types=_TYPES, strings_can_be_null=False,
                                null_values=[""], check_utf8=False)
ID_DIGITS = 8  # every non-empty Criteo id; other widths go through _decode


def _ids_of(column: "pa.ChunkedArray", rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids, valid) of one id column: its non-empty values lie back to back in Arrow's data
    buffer, so 8-digit ids are decoded as one [n, 8] byte array (two hex digits per byte, read
    as big-endian uint32) with no per-field gather."""
    array = column.combine_chunks()
    _, offsets_buf, data_buf = array.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int32)[array.offset:array.offset + rows + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    lengths = np.diff(offsets)
    present = lengths > 0
    ids = np.zeros(rows, dtype=np.int64)
    if (lengths[present] == ID_DIGITS).all():
        used = data[offsets[0]:offsets[-1]].reshape(-1, ID_DIGITS)
        nibbles = _HEX[used]
        valid = np.ones(rows, dtype=bool)
        valid[present] = (nibbles != 255).all(axis=1)
        packed = np.ascontiguousarray((nibbles[:, 0::2] << 4) | (nibbles[:, 1::2] & 15))
        ids[present] = packed.view(">u4").reshape(-1)
        return ids, valid
    values, valid = _decode(data, offsets[:-1], lengths, _HEX, 16, False)
    return values, valid


def parse_block(block: bytes) -> Parsed:
    """``parse_lines``'s result, through Arrow when the block allows (about 4x faster);
    blocks Arrow refuses (a bad number, a CR) take the numpy path, which names nothing
    but decides every line the same way."""
    if not block or b"\r" in block:
        return parse_lines(block)
    skipped: list[int] = []

    def skip(row: "pacsv.InvalidRow") -> str:
        skipped.append(row.number)
        return "skip"

    try:
        table = pacsv.read_csv(
            pa.py_buffer(block),
            read_options=pacsv.ReadOptions(column_names=_COLUMNS, use_threads=False,
                                           block_size=max(len(block), 1 << 20)),
            parse_options=pacsv.ParseOptions(**{**_PARSE_ARGS, "invalid_row_handler": skip}),
            convert_options=_CONVERT)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return parse_lines(block)
    if any(number < 1 for number in skipped):  # Arrow could not say which line: be exact
        return parse_lines(block)
    rows = table.num_rows
    lines = rows + len(skipped)
    ok = np.ones(lines, dtype=bool)
    ok[np.asarray(skipped, dtype=np.int64) - 1] = False
    numbers = np.stack([table.column(i).fill_null(0).to_numpy() for i in range(1 + NUM_DENSE_FEATURES)],
                       axis=1).astype(np.int64, copy=False)
    good = (table.column(0).is_valid().to_numpy(zero_copy_only=False)
            & ((numbers[:, 0] == 0) | (numbers[:, 0] == 1)))
    ids = np.empty((rows, NUM_SPARSE_FEATURES), dtype=np.int64)
    for j in range(NUM_SPARSE_FEATURES):
        ids[:, j], valid = _ids_of(table.column(1 + NUM_DENSE_FEATURES + j), rows)
        good &= valid
    ok[np.flatnonzero(ok)[~good]] = False
    return Parsed(ok, numbers[good, 0], numbers[good, 1:], ids[good])


def dense_minimum(block: bytes) -> int | None:
    """The least integer feature of the block's well-formed lines (empty = 0), or None if it
    has none: torchrec's dense transform subtracts the whole file's minimum."""
    parsed = parse_block(block)
    return int(parsed.ints.min()) if len(parsed.ints) else None
