"""``python -m trainer.prepare``: raw Criteo TSV day files -> the layout the trainer reads.

Three passes, each resumable, each spread over ``--workers`` processes:

1. scan (per day, ``scan.py``): rows, the dense minimum torchrec's transform needs, and each
   column's distinct ids with their counts and first row, saved per day;
2. vocabulary (per column, ``vocab.py``): the days' counts merged into torchrec's contiguous
   ids (``sparse_to_contiguous``: numbered by first appearance from 2, ids seen fewer than
   ``--frequency_threshold`` times share id 1), capped by ``--max_ind_range`` (modulo);
3. write (per day, ``write.py``): ``day_<i>_{dense,sparse,labels}.npy`` as torchrec's
   ``tsv_to_npys`` then ``sparse_to_contiguous`` would leave them, plus MLPerf's
   ``day_<i>_sparse_multi_hot.npz`` with ``--multi_hot_sizes`` (``multi_hot.py``).

``layout.json`` is written last (``run.py``); see the README for the files and their dtypes.
"""

import math
from typing import List, Optional

# Memory one worker may need on a real Criteo 1TB day: the README's estimate (about 4-5 GB for
# a 195M-row day's scan, 5 GB for the vocabulary of MLPerf's largest column) with a margin. The
# stack gives a pod no more workers than its memory holds at this size (default_workers below;
# the settings refuse a larger dataset.prepare.workers).
WORKER_MEMORY_GIB = 6

# Rows of the raw data: Criteo 1TB's days 0-22 hold 4,195,197,692 (TOTAL_TRAINING_SAMPLES,
# mlcommons/training recommendation_v2/torchrec_dlrm/README.MD) and day 23 178,274,637 (the row
# count NVIDIA's MLPerf Inference DLRMv2 harness asserts for day_23, CriteoDay23Dataset); Kaggle's
# train.txt 45,840,617 lines (Criteo's Display Advertising Challenge data).
CRITEO_1TB_TRAINING_ROWS = 4_195_197_692  # days 0-22
CRITEO_1TB_ROWS = CRITEO_1TB_TRAINING_ROWS + 178_274_637
CRITEO_KAGGLE_ROWS = 45_840_617
# Rows/s of one worker, the lower ends measured by bench/prepare_bench.py on 2 shared cores
# (README "Memory and speed"); the vocabulary pass, the source's read speed and gzip come on top.
SCAN_ROWS_PER_SECOND = 120_000
WRITE_ROWS_PER_SECOND = 120_000
WRITE_MULTI_HOT_ROWS_PER_SECOND = 80_000  # one-hot and multi-hot files of a day in one task
# With --shuffle_seed (MLPerf): the days are written one-hot, shuffled, then made multi-hot.
# Drawing the permutation is one process (numpy's shuffle, 164 ns a row measured here on
# 6M rows; 11.5 min for Criteo 1TB's 4.2B); gathering a shuffled day from days in the page
# cache ran at 175k rows/s per worker (trainer/prepare/shuffle.py write_day, 2M rows, MLPerf's
# hashes); a multi-hot day is written at 126k rows/s per worker (issue 30's measurement).
PERMUTATION_SECONDS_PER_ROW = 164e-9
# MLPerf's multi-hot lookup tables (trainer/prepare/multi_hot.py make_tables: numpy's
# RandomState.randint, int32 written to .npy) drew 8.2M ids/s here (two tables of 1M rows,
# sizes 101 and 28, 15.5 s on 2 shared cores): MLPerf's 5.8 billion ids, ~12 min, at each pod
# start where the ids are drawn on the fly (torchrec_cloud/time_to_train.py prices it).
MULTI_HOT_TABLE_IDS_PER_SECOND = 8_200_000
SHUFFLE_ROWS_PER_SECOND = 175_000
MULTI_HOT_ROWS_PER_SECOND = 126_000


def read_bytes_per_sample(materialized_multi_hot_sizes: Optional[List[int]]) -> int:
    """Bytes the trainer reads for one training sample: 13 float32 dense features, the int32
    label and int32 ids, one per feature (one-hot days, also when the multi-hot ids are drawn on
    the fly) or each feature's multi-hot size (materialized .npz). MLPerf's sizes: 912 bytes,
    3.83 TB per epoch of Criteo 1TB's 4.2B training rows; one-hot: 160 bytes, 0.67 TB."""
    ids = sum(materialized_multi_hot_sizes) if materialized_multi_hot_sizes else 26
    return 4 * (13 + 1 + ids)


def default_workers(cpu: int, memory_gib: int) -> int:
    """One worker per CPU, as far as the memory holds WORKER_MEMORY_GIB for each."""
    return max(1, min(cpu, memory_gib // WORKER_MEMORY_GIB))


def estimated_hours(rows: int, files: int, workers: int, multi_hot: bool,
                    shuffled: bool = False) -> float:
    """The scan and write passes at the measured rates, and with ``shuffled`` the shuffle and
    the multi-hot days written after it: each file is one worker's task and each pass ends
    with its last file, so a pass takes ceil(files / workers) files' time. The shuffle draws
    its permutation in one process over the training days (all files but the last), then
    gathers each of them in one task."""
    rounds = math.ceil(files / max(1, workers)) if files else 0
    per_file = rows / max(1, files)
    if not shuffled:
        write = WRITE_MULTI_HOT_ROWS_PER_SECOND if multi_hot else WRITE_ROWS_PER_SECOND
        return rounds * per_file * (1 / SCAN_ROWS_PER_SECOND + 1 / write) / 3600
    seconds = rounds * per_file * (1 / SCAN_ROWS_PER_SECOND + 1 / WRITE_ROWS_PER_SECOND)
    train = max(0, files - 1)
    seconds += per_file * train * PERMUTATION_SECONDS_PER_ROW
    seconds += math.ceil(train / max(1, workers)) * per_file / SHUFFLE_ROWS_PER_SECOND
    if multi_hot:
        seconds += rounds * per_file / MULTI_HOT_ROWS_PER_SECOND
    return seconds / 3600
