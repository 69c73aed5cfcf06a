"""``layout.json``: what ``python -m trainer.prepare`` leaves in a data directory, written last.

Its presence means the directory is complete (the training pods wait for it,
workloads/prepare.py); its ``num_embeddings_per_feature`` are the prepared tables' sizes (the
largest contiguous id + 1 per feature, capped by --max_ind_range), which the trainer uses when
no sizes are given, so a model always has a row for every id in the data.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional

LAYOUT_FILE = "layout.json"


def layout_path(dataset_path: str) -> str:
    return os.path.join(dataset_path, LAYOUT_FILE)


def read_layout(dataset_path: Optional[str]) -> Optional[Dict[str, Any]]:
    """The directory's layout.json, or None where there is none (raw TSV, a single file, data
    prepared elsewhere)."""
    if not dataset_path or not os.path.isfile(layout_path(dataset_path)):
        return None
    with open(layout_path(dataset_path)) as fh:
        return json.load(fh)


def _ints(layout: Optional[Dict[str, Any]], key: str) -> Optional[List[int]]:
    values = (layout or {}).get(key)
    return [int(v) for v in values] if values else None


def prepared_table_sizes(dataset_path: Optional[str]) -> Optional[List[int]]:
    """The table sizes a prepared directory records, or None."""
    return _ints(read_layout(dataset_path), "num_embeddings_per_feature")


def prepared_multi_hot_sizes(dataset_path: Optional[str]) -> Optional[List[int]]:
    """The ids per feature of materialized multi-hot days (day_<i>_sparse_multi_hot.npz), or
    None where the preparation wrote one-hot days only."""
    return _ints(read_layout(dataset_path), "multi_hot_sizes")
