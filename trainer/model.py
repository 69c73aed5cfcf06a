"""DLRM on a TorchRec EmbeddingBagCollection, with dot or DCNv2 interaction."""

from __future__ import annotations

import torch
from torchrec import EmbeddingBagCollection
from torchrec.models.dlrm import DLRM, DLRM_DCN, DLRMTrain
from torchrec.modules.embedding_configs import EmbeddingBagConfig

from trainer.config import NUM_DENSE_FEATURES, TrainConfig
from trainer.data.batch import SPARSE_KEYS


def embedding_tables(cfg: TrainConfig) -> list[EmbeddingBagConfig]:
    """One table per Criteo categorical feature, named t_<feature> like the TorchRec example."""
    return [
        EmbeddingBagConfig(
            name=f"t_{feature}",
            embedding_dim=cfg.embedding_dim,
            num_embeddings=rows,
            feature_names=[feature],
        )
        for feature, rows in zip(SPARSE_KEYS, cfg.table_sizes)
    ]


def build_model(cfg: TrainConfig, dense_device: torch.device) -> DLRMTrain:
    """Unsharded model: tables on the meta device (DMP materialises only each rank's
    shards), dense layers on ``dense_device``. Weights are seeded by ``cfg.seed``."""
    torch.manual_seed(cfg.seed)
    ebc = EmbeddingBagCollection(tables=embedding_tables(cfg), device=torch.device("meta"))
    common = dict(
        embedding_bag_collection=ebc,
        dense_in_features=NUM_DENSE_FEATURES,
        dense_arch_layer_sizes=cfg.dense_arch_layer_sizes,
        over_arch_layer_sizes=cfg.over_arch_layer_sizes,
        dense_device=dense_device,
    )
    if cfg.interaction == "dcn":
        dlrm = DLRM_DCN(dcn_num_layers=cfg.dcn_num_layers, dcn_low_rank_dim=cfg.dcn_low_rank_dim, **common)
    else:
        dlrm = DLRM(**common)
    return DLRMTrain(dlrm)
