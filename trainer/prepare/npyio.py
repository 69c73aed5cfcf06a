"""``.npy`` files and ``.npz`` members written a block at a time, with the row count known
beforehand (from the scan), so a 195M-row day never has to be in memory. The headers are
numpy's own (``np.lib.format.write_array_header_1_0``), as ``np.save`` writes them for
arrays this size; members are stored uncompressed with zip64, as ``np.savez`` does
(numpy ``_savez``: ``ZIP_STORED``, ``zipf.open(name, 'w', force_zip64=True)``)."""

from __future__ import annotations

import os
import zipfile
from typing import BinaryIO, Tuple

import numpy as np


class ArrayWriter:
    """Rows appended to an ``.npy`` stream; ``close`` checks that the promised count came."""

    def __init__(self, fh: BinaryIO, dtype: np.dtype, shape: Tuple[int, ...]) -> None:
        self.fh, self.dtype, self.shape, self.written = fh, np.dtype(dtype), shape, 0
        np.lib.format.write_array_header_1_0(
            fh, {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False, "shape": shape})

    def append(self, rows: np.ndarray) -> None:
        rows = np.ascontiguousarray(rows, dtype=self.dtype)
        if rows.shape[1:] != self.shape[1:]:
            raise ValueError(f"rows of shape {rows.shape[1:]}, expected {self.shape[1:]}")
        self.fh.write(rows.tobytes())
        self.written += len(rows)

    def finish(self) -> None:
        if self.written != self.shape[0]:
            raise RuntimeError(f"wrote {self.written} rows, expected {self.shape[0]}: the source "
                               "changed since the scan")


class NpyFile:
    """``path`` written as ``path.tmp`` and renamed by the caller once all its parts are."""

    def __init__(self, path: str, dtype: np.dtype, shape: Tuple[int, ...]) -> None:
        self.path, self.tmp = path, path + ".tmp"
        self._fh = open(self.tmp, "wb")
        self.array = ArrayWriter(self._fh, dtype, shape)

    def close(self) -> None:
        self.array.finish()
        self._fh.close()

    def commit(self) -> None:
        os.replace(self.tmp, self.path)


class NpzFile:
    """A zip of ``.npy`` members written one after the other (``member`` then ``append``)."""

    def __init__(self, path: str) -> None:
        self.path, self.tmp = path, path + ".tmp"
        self._zip = zipfile.ZipFile(self.tmp, "w", compression=zipfile.ZIP_STORED, allowZip64=True)
        self._member = None
        self.array: ArrayWriter | None = None

    def member(self, name: str, dtype: np.dtype, shape: Tuple[int, ...]) -> ArrayWriter:
        self._end_member()
        self._member = self._zip.open(f"{name}.npy", "w", force_zip64=True)
        self.array = ArrayWriter(self._member, dtype, shape)  # type: ignore[arg-type]
        return self.array

    def _end_member(self) -> None:
        if self._member is not None and self.array is not None:
            self.array.finish()
            self._member.close()
            self._member = None

    def close(self) -> None:
        self._end_member()
        self._zip.close()

    def commit(self) -> None:
        os.replace(self.tmp, self.path)
