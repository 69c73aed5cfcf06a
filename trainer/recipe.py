"""``--recipe mlperf``: every hyper-parameter of mlcommons' DLRM-DCNv2 reference, in one place.

Source: mlcommons/training, commit aa344c7fb900e82ed19fb94aebfed50c63ab2204,
recommendation_v2/torchrec_dlrm/:
- README.MD, "Run the MLPerf DLRM v2 benchmark" (the run script): ``GLOBAL_BATCH_SIZE=65536``,
  ``--embedding_dim 128 --dense_arch_layer_sizes 512,256,128 --over_arch_layer_sizes
  1024,1024,512,256,1 --num_embeddings_per_feature 40000000,39060,...
  --validation_freq_within_epoch $((TOTAL_TRAINING_SAMPLES / (GLOBAL_BATCH_SIZE * 20)))
  --epochs 1 --interaction_type=dcn --dcn_num_layers=3 --dcn_low_rank_dim=512 --adagrad
  --learning_rate 0.005``, "The proposed target AUROC to reach within one epoch is 0.80275";
  its on-the-fly variant adds ``--multi_hot_distribution_type uniform
  --multi_hot_sizes=3,2,1,2,6,1,1,1,1,7,3,8,1,6,9,5,1,1,1,12,100,27,10,3,1,1``.
- dlrm_main.py ``parse_args`` defaults: ``--lr_warmup_steps 0 --lr_decay_start 0
  --lr_decay_steps 0``; ``ADAGRAD_EPS = 1e-8``, ``ADAGRAD_LR_DECAY = ADAGRAD_INIT_ACC =
  WEIGHT_DECAY = 0``; ``--adagrad`` = ``torch.optim.Adagrad`` in the embeddings' backward, which
  torchrec maps to ``EmbOptimType.EXACT_ADAGRAD`` (torchrec 1.8 distributed/utils.py), and
  ``torch.optim.Adagrad`` for the dense part; validation over the whole validation set
  (``--limit_val_batches`` None, ``drop_last`` False for "val"), a stop once its AUROC reaches
  ``--validation_auroc``.
tests/trainer/test_recipe.py runs the reference's own ``parse_args`` on that run script and
compares the result with ``parse_config(["--recipe", "mlperf"])``.
"""

from __future__ import annotations

from typing import Any, Dict

from trainer.sizing import DATA_PARALLEL_MAX_MB

MLPERF_GLOBAL_BATCH = 65536
# Criteo 1TB multi-hot tables, ids capped at 40M rows (README.MD, the run script).
MLPERF_TABLE_SIZES = [40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956,
                      405282, 10, 2209, 11938, 155, 4, 976, 14, 40000000, 40000000, 40000000,
                      590152, 12973, 108, 36]
MLPERF_MULTI_HOT_SIZES = [3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27,
                          10, 3, 1, 1]
MLPERF_TARGET_AUC = 0.80275
MLPERF_EVALS_PER_EPOCH = 20  # validation every 0.05 epoch

# Flag values (TrainConfig field names). Explicit flags on the command line override them
# (e.g. tiny tables for a smoke test); the recipe fills in everything else.
RECIPES: Dict[str, Dict[str, Any]] = {
    "mlperf": {
        "embedding_dim": 128,
        "dense_arch_layer_sizes": [512, 256, 128],
        "over_arch_layer_sizes": [1024, 1024, 512, 256, 1],
        "num_embeddings_per_feature": MLPERF_TABLE_SIZES,
        "interaction": "dcn",
        "dcn_num_layers": 3,
        "dcn_low_rank_dim": 512,
        "optimizer": "exact_adagrad",
        "learning_rate": 0.005,
        "lr_warmup_steps": 0,
        "lr_decay_start": 0,
        "lr_decay_steps": 0,
        "global_batch_size": MLPERF_GLOBAL_BATCH,
        "num_epochs": 1,
        "multi_hot_sizes": MLPERF_MULTI_HOT_SIZES,
        "multi_hot_distribution_type": "uniform",
        "evals_per_epoch": MLPERF_EVALS_PER_EPOCH,
        "eval_batches": -1,
        "validation_auroc": MLPERF_TARGET_AUC,
        # Not the reference's: our world-size-free sharding rule (trainer/sizing.py), set so
        # the plan is the one torchrec's planner picks for these tables (python -m torchrec_cloud plan).
        "data_parallel_max_mb": DATA_PARALLEL_MAX_MB,
    },
}
