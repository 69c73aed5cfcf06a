"""DLRM on a TorchRec EmbeddingBagCollection, with dot or DCNv2 interaction."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import torch
from torchrec import EmbeddingBagCollection
from torchrec.models.dlrm import DLRM, DLRM_DCN, DLRMTrain
from torchrec.modules.embedding_configs import EmbeddingBagConfig
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

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


class _LookupFirst:
    """DLRM's forward, reordered and without a split/cat; the same modules, parameters and math.

    TorchRec's DLRM runs the dense MLP, then the embedding lookup, then splits the pooled
    embeddings into one tensor per feature and concatenates them again in feature order.
    Here the sharded lookup starts first, so its output all-to-all is in flight while the
    dense MLP runs, and the pooled values are viewed as [B, F, D]. Under DMP the pooled
    columns come in the sharding plan's order, not feature order (a 2-rank plan gave
    f0, f2, f1), and the plan changes with the world size: the features are put back in
    order by name, with an index computed once per key order (none when already in order)."""

    def forward(self, dense_features: torch.Tensor, sparse_features: KeyedJaggedTensor) -> torch.Tensor:
        sparse = self.sparse_arch  # type: ignore[attr-defined]
        pooled = sparse.embedding_bag_collection(sparse_features)  # awaited lazily under DMP
        embedded_dense = self.dense_arch(dense_features)  # type: ignore[attr-defined]
        embedded_sparse = _in_feature_order(pooled.values().reshape(-1, sparse.F, sparse.D),
                                            pooled.keys(), sparse.sparse_feature_names)
        interaction = self.inter_arch(  # type: ignore[attr-defined]
            dense_features=embedded_dense, sparse_features=embedded_sparse)
        return self.over_arch(interaction)  # type: ignore[attr-defined]


_ORDERS: Dict[Tuple[Tuple[str, ...], Tuple[str, ...], torch.device], Optional[torch.Tensor]] = {}


@torch.fx.wrap  # a leaf for the train pipeline's tracer: it cannot iterate traced keys
def _in_feature_order(embedded: torch.Tensor, keys: List[str], names: List[str]) -> torch.Tensor:
    """``embedded`` [B, F, D] with its features (in ``keys`` order) put in ``names`` order.

    The index is computed once per key order (fixed for a given sharding plan) and is
    skipped when the order already matches."""
    cache_key = (tuple(keys), tuple(names), embedded.device)
    if cache_key not in _ORDERS:
        assert sorted(keys) == sorted(names), f"pooled features {keys}, model features {names}"
        position = {name: i for i, name in enumerate(keys)}
        index = [position[name] for name in names]
        in_order = index == list(range(len(names)))
        _ORDERS[cache_key] = None if in_order else torch.tensor(index, device=embedded.device)
    order = _ORDERS[cache_key]
    return embedded if order is None else embedded.index_select(1, order)


class FastDLRM(_LookupFirst, DLRM):
    """torchrec.models.dlrm.DLRM with the lookup-first forward."""


class FastDLRM_DCN(_LookupFirst, DLRM_DCN):
    """torchrec.models.dlrm.DLRM_DCN (DCNv2 interaction) with the lookup-first forward."""


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
        dlrm = FastDLRM_DCN(dcn_num_layers=cfg.dcn_num_layers, dcn_low_rank_dim=cfg.dcn_low_rank_dim, **common)
    else:
        dlrm = FastDLRM(**common)
    # One feature per table, named like the batch's keys: the forward orders columns by name.
    assert dlrm.sparse_arch.sparse_feature_names == SPARSE_KEYS[: len(cfg.table_sizes)]
    return DLRMTrain(dlrm)
