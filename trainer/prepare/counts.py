"""Distinct ids of one column with their counts and first occurrence, merged in bulk.

The vocabulary pass keeps, per column, sorted distinct ids (int64), how often each was seen
(int64) and where it was first seen (int64 key: day order << 40 | row). ``merge`` combines any
number of such sets with one sort, so a day is reduced block by block and the days are then
reduced into the whole dataset's counts without a Python loop per id.
"""

from __future__ import annotations

from typing import List, NamedTuple

import numpy as np

ROW_BITS = 40  # rows per day < 2**40 (a 1TB day has about 2**28)


class Counts(NamedTuple):
    ids: np.ndarray  # int64, sorted, distinct
    counts: np.ndarray  # int64
    first: np.ndarray  # int64, day order << ROW_BITS | row of the first occurrence


def of_column(values: np.ndarray, first_row: int, day_order: int = 0) -> Counts:
    """The counts of one block's column whose first row is ``first_row`` of its day."""
    ids, where, counts = np.unique(values, return_index=True, return_counts=True)
    first = (np.int64(day_order) << ROW_BITS) + first_row + where.astype(np.int64)
    return Counts(ids.astype(np.int64, copy=False), counts.astype(np.int64), first)


def merge(parts: List[Counts]) -> Counts:
    """One set: counts added, the earliest first occurrence kept."""
    if len(parts) == 1:
        return parts[0]
    ids = np.concatenate([p.ids for p in parts])
    counts = np.concatenate([p.counts for p in parts])
    first = np.concatenate([p.first for p in parts])
    order = np.lexsort((first, ids))  # by id, then earliest first
    ids, counts, first = ids[order], counts[order], first[order]
    starts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))
    return Counts(ids[starts], np.add.reduceat(counts, starts) if len(ids) else counts,
                  first[starts])


class Accumulator:
    """Block counts merged lazily: pending sets are merged once they outweigh the running
    one, so each id is re-sorted O(log blocks) times rather than once per block."""

    def __init__(self) -> None:
        self.done = Counts(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
        self.pending: List[Counts] = []
        self.pending_size = 0

    def add(self, part: Counts) -> None:
        self.pending.append(part)
        self.pending_size += len(part.ids)
        if self.pending_size > max(len(self.done.ids), 1 << 20):
            self.result()

    def result(self) -> Counts:
        if self.pending:
            self.done = merge([self.done, *self.pending])
            self.pending, self.pending_size = [], 0
        return self.done
