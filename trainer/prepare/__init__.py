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

# Memory one worker may need on a real Criteo 1TB day: the README's estimate (about 4-5 GB for
# a 195M-row day's scan, 5 GB for the vocabulary of MLPerf's largest column) with a margin. The
# stack gives a pod no more workers than its memory holds at this size (workloads/prepare.py).
WORKER_MEMORY_GIB = 6
