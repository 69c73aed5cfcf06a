"""The memory the preparation's shuffle needs, in one place and without numpy: the settings'
rule refuses a pod with less (infra/settings/prepare_rules.py prepare_shuffle_fits_its_pod) on a laptop
whose `make check` installs only pydantic and PyYAML; trainer/prepare/shuffle.py does the work."""

from __future__ import annotations

from trainer.config import NUM_DENSE_FEATURES, NUM_SPARSE_FEATURES

CHUNK_ROWS = 1 << 22  # output rows gathered at a time: about 2.5 GB of rows, indices and ids

# The memory the shuffle needs, in one place (the settings' rule refuses a pod with less:
# infra/settings/prepare_rules.py prepare_shuffle_fits_its_pod). Measured with tracemalloc on numpy 2.4
# (1M-row chunks of MLPerf-sized ids, hashed): 585 bytes per row of a chunk at the gather's peak
# (the rows sorted by day, concatenated and put back in order, the float32 round trip and the
# modulo's int64 temporaries).
PERMUTATION_BYTES_PER_ROW = 4  # uint32
DAY_BYTES_PER_ROW = 4 * (NUM_DENSE_FEATURES + NUM_SPARSE_FEATURES + 1)  # 160: float32/int32 row
GATHER_BYTES_PER_ROW = 600


def memory_bytes(rows: int, days: int, workers: int) -> int:
    """Memory for shuffling ``rows`` rows of ``days`` training days on ``workers`` workers: the
    larger of drawing the permutation (the parent holds it, 4 bytes a row: 16.8 GB for Criteo
    1TB's 4,195,197,692) and gathering, when every chunk of every output day reads rows at
    random from all input days through their memory maps: the days must stay in the page cache
    (160 bytes a row, 671 GB), or each chunk re-reads a 4 KiB page from the file system for
    almost every row (12 KiB a row, about 50 TB over the whole shuffle), beside one chunk per busy worker (one
    day each: at most ``days``). Criteo 1TB with 23 busy workers: about 729 GB (679 GiB)."""
    busy = max(1, min(workers, days))
    draw = rows * PERMUTATION_BYTES_PER_ROW
    gather = rows * DAY_BYTES_PER_ROW + busy * CHUNK_ROWS * GATHER_BYTES_PER_ROW
    return max(draw, gather)
