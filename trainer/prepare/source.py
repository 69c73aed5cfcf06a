"""Where the raw TSV files are (a directory or an fsspec URI) and how they are streamed.

File names follow torchrec's ``npy_preproc_criteo.py`` (torchrec 1.8.0,
torchrec/datasets/scripts/npy_preproc_criteo.py: ``day_{0..23}`` for criteo_1tb,
``train.txt`` for criteo_kaggle) and Criteo's download (``day_<i>.gz``). A day file is
50 GB uncompressed, so it is never read whole: ``blocks`` yields whole lines a block at a
time, decompressing ``.gz`` on the fly (fsspec ``compression="infer"``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator, List, Optional

import fsspec

from trainer.prepare.errors import bad_flag

DAY_FILE = re.compile(r"^day_(\d+)(\.gz)?$")
KAGGLE_FILES = ("train.txt", "train.txt.gz")
DAYS_1TB = 24  # torchrec.datasets.criteo.DAYS
BLOCK_BYTES = 32 << 20  # one parse block; sets the per-worker memory (see README)


@dataclass(frozen=True)
class RawFile:
    """One raw TSV file and the name of its outputs (``day_3`` -> ``day_3_dense.npy``)."""

    url: str
    prefix: str  # output name: "day_<i>" or "train"
    size: int  # bytes as stored: a changed source file makes its day redone


def find(source: str, dataset: Optional[str], days: Optional[List[int]]) -> tuple[str, List[RawFile]]:
    """(dataset, files to prepare), or UsageError naming the flag that does not fit."""
    try:
        # A new file system object per attempt (and per file below): fsspec caches them per
        # process, and one cached by a failed attempt keeps that attempt's endpoint or
        # credentials (gcsfs falls back to anonymous before workload identity is bound).
        fs, root = fsspec.core.url_to_fs(source, skip_instance_cache=True)
        listing = fs.ls(root, detail=True)
    except (FileNotFoundError, NotADirectoryError):
        raise bad_flag("source", source, "a directory or bucket prefix holding day_<i>[.gz] or train.txt; "
                       "not found") from None
    files = {entry["name"].rstrip("/").rsplit("/", 1)[-1]: (_url(source, root, entry["name"]), int(entry.get("size") or 0))
             for entry in listing if entry.get("type") == "file"}
    found_days = {}
    for name, where in sorted(files.items()):  # "day_3" sorts before "day_3.gz": plain text wins
        match = DAY_FILE.match(name)
        if match:
            found_days.setdefault(int(match.group(1)), where)
    kaggle = next((files[n] for n in KAGGLE_FILES if n in files), None)
    if dataset is None:
        dataset = "criteo_1tb" if found_days or not kaggle else "criteo_kaggle"
    if dataset == "criteo_kaggle":
        if kaggle is None:
            raise bad_flag("source", source, "--dataset criteo_kaggle needs train.txt[.gz] there")
        if days is not None:
            raise bad_flag("days", ",".join(map(str, days)), "only for --dataset criteo_1tb")
        return dataset, [RawFile(kaggle[0], "train", kaggle[1])]
    if not found_days:
        raise bad_flag("source", source, "no day_<i> or day_<i>.gz files there (criteo_1tb)")
    wanted = sorted(found_days) if days is None else days
    missing = [d for d in wanted if d not in found_days]
    if missing:
        raise bad_flag("days", _span(wanted), f"day files found in {source}: {_span(sorted(found_days))}; "
                       f"missing {_span(missing)}")
    return dataset, [RawFile(found_days[d][0], f"day_{d}", found_days[d][1]) for d in wanted]


def _url(source: str, root: str, name: str) -> str:
    """A listed file's URL as the source spells it, so that what the source's URL says beyond
    the path (an Azure account: az://container@account.blob.core.windows.net/...) reaches the
    workers that open the file."""
    if "://" not in source:
        return name
    root = root.rstrip("/")
    if name.startswith(root + "/"):
        return source.rstrip("/") + name[len(root):]
    return source.split("://", 1)[0] + "://" + name


def _span(days: List[int]) -> str:
    return ",".join(map(str, days))


def blocks(url: str, block_bytes: Optional[int] = None) -> Iterator[bytes]:
    """The file's lines, ``block_bytes`` (default BLOCK_BYTES) or so at a time, each block
    ending at a line end."""
    block_bytes = block_bytes or BLOCK_BYTES
    carry = b""
    with fsspec.open(url, "rb", compression="infer", skip_instance_cache=True) as fh:
        while chunk := fh.read(block_bytes):
            whole, newline, rest = (carry + chunk).rpartition(b"\n")
            if newline:
                yield whole + newline
                carry = rest
            else:
                carry = rest  # no line end yet: a line longer than a block
    if carry.strip():
        yield carry + b"\n"


def parse_days(text: str) -> List[int]:
    """``0-23``, ``0,1,5`` or ``0-3,7`` -> sorted day numbers."""
    days = set()
    try:
        for part in text.split(","):
            lo, _, hi = part.strip().partition("-")
            first, last = int(lo), int(hi or lo)
            if first > last:
                raise ValueError
            days.update(range(first, last + 1))
    except ValueError:
        raise bad_flag("days", text, "day numbers or ranges such as 0-23 or 0,1,5") from None
    if not days or min(days) < 0 or max(days) >= DAYS_1TB:
        raise bad_flag("days", text, f"days within 0-{DAYS_1TB - 1}")
    return sorted(days)
