"""MLPerf's data preparation as the reference runs it, from the vendored code: torchrec 1.8.0's
``BinaryCriteoUtils`` (tests/trainer/data/torchrec_reference/criteo.py) for steps 1-3 of
mlcommons/training aa344c7 recommendation_v2/torchrec_dlrm/scripts/
process_Criteo_1TB_Click_Logs_dataset.sh, and that commit's
scripts/materialize_synthetic_multihot_dataset.py (tests/trainer/data/mlperf_reference/)."""

from __future__ import annotations

import importlib.util
import os
import runpy
import sys
from pathlib import Path
from types import ModuleType
from typing import List
from unittest import mock

import numpy as np

DATA = Path(__file__).parent / "data"
PARTS = ("dense", "sparse", "labels")


def torchrec_criteo() -> ModuleType:
    """The vendored torchrec/datasets/criteo.py, loaded under its own name."""
    spec = importlib.util.spec_from_file_location("torchrec_reference_criteo",
                                                  DATA / "torchrec_reference" / "criteo.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def steps_1_to_3(raw: Path, ref: Path, days: int, seed: int) -> Path:
    """MLPerf's preprocessing of ``raw``'s TSV days; returns step 3's folder (``ref/out``)."""
    utils = torchrec_criteo().BinaryCriteoUtils
    step1, step2 = ref / "step1", ref / "step2"
    for folder in (step1, step2, ref / "out"):
        folder.mkdir(parents=True)
    for day in range(days):  # npy_preproc_criteo
        utils.tsv_to_npys(str(raw / f"day_{day}"), *(str(step1 / f"day_{day}_{p}.npy") for p in PARTS))
    utils.sparse_to_contiguous(  # contiguous_preproc_criteo --frequency_threshold 0
        [str(step1 / f"day_{d}_sparse.npy") for d in range(days)], str(step2), frequency_threshold=0)
    for day in range(days):
        os.replace(step2 / f"day_{day}_sparse_contig_freq.npy", step2 / f"day_{day}_sparse.npy")
    rows = {d: np.load(step1 / f"day_{d}_labels.npy").shape[0] for d in range(days - 1)}
    utils.shuffle(str(step1), str(step2), str(ref / "out"), rows,  # shuffle_preproc_criteo
                  days=days, random_seed=seed)
    return ref / "out"


def materialize(days_dir: Path, out: Path, days: int, num_embeddings: List[int],
                multi_hot_sizes: List[int], distribution: str) -> None:
    """The reference's materialize script as its README runs it (one process: no torch.distributed
    environment, so rank 0 of 1 writes every day). It loops over torchrec's ``DAYS`` (24): the
    test's ``days`` stand in for it."""
    import torchrec.datasets.criteo

    script = DATA / "mlperf_reference" / "scripts" / "materialize_synthetic_multihot_dataset.py"
    argv = [str(script), "--in_memory_binary_criteo_path", str(days_dir), "--output_path", str(out),
            "--num_embeddings_per_feature", ",".join(map(str, num_embeddings)),
            "--multi_hot_sizes", ",".join(map(str, multi_hot_sizes)),
            "--multi_hot_distribution_type", distribution]
    clean = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR")}
    with mock.patch.object(torchrec.datasets.criteo, "DAYS", days), mock.patch.object(sys, "argv", argv), \
            mock.patch.dict(os.environ, clean, clear=True), mock.patch.object(sys, "path", list(sys.path)):
        sys.modules.pop("multi_hot", None)
        runpy.run_path(str(script), run_name="__main__")
        sys.modules.pop("multi_hot", None)
