"""The model: DLRM on an EmbeddingBagCollection, dot or DCN interaction."""

import pytest
import torch
from torchrec import EmbeddingBagCollection
from torchrec.sparse.jagged_tensor import KeyedTensor

from trainer.config import parse_config
from trainer.data.synthetic import SyntheticSource
from trainer.model import build_model


@pytest.mark.parametrize("interaction", ["dot", "dcn"])
def test_forward_and_backward_shapes(interaction):
    cfg = parse_config(["--num_embeddings", "50", "--embedding_dim", "8", "--dense_arch_layer_sizes", "16,8",
                        "--over_arch_layer_sizes", "16,1", "--interaction", interaction,
                        "--dcn_low_rank_dim", "4"])
    model = build_model(cfg, torch.device("cpu"))
    ebc = model.model.sparse_arch.embedding_bag_collection
    assert isinstance(ebc, EmbeddingBagCollection) and len(ebc.embedding_bag_configs()) == 26
    # Tables are built on the meta device for sharding; materialise them for a plain forward.
    model.model.sparse_arch.embedding_bag_collection = EmbeddingBagCollection(
        tables=ebc.embedding_bag_configs(), device=torch.device("cpu"))
    batch = SyntheticSource(cfg.table_sizes, 5, seed=0, rank=0, steps_per_epoch=1).batch(0, 0)
    loss, (_, logits, labels) = model(batch)
    assert loss.shape == () and logits.shape == (5,) and labels.shape == (5,)
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.shape == p.shape, name


def _ours_and_stock(interaction: str):
    """Our model and TorchRec's stock DLRM with the same weights (unsharded, CPU), and a batch."""
    from torchrec.models.dlrm import DLRM, DLRM_DCN

    cfg = parse_config(["--num_embeddings", "50", "--embedding_dim", "8", "--dense_arch_layer_sizes", "16,8",
                        "--over_arch_layer_sizes", "16,1", "--interaction", interaction,
                        "--dcn_low_rank_dim", "4"])
    ours = build_model(cfg, torch.device("cpu")).model
    tables = ours.sparse_arch.embedding_bag_collection.embedding_bag_configs()
    ours.sparse_arch.embedding_bag_collection = EmbeddingBagCollection(tables=tables, device=torch.device("cpu"))
    common = dict(embedding_bag_collection=EmbeddingBagCollection(tables=tables, device=torch.device("cpu")),
                  dense_in_features=13, dense_arch_layer_sizes=[16, 8], over_arch_layer_sizes=[16, 1])
    stock = DLRM_DCN(dcn_num_layers=3, dcn_low_rank_dim=4, **common) if interaction == "dcn" else DLRM(**common)
    stock.load_state_dict(ours.state_dict())
    batch = SyntheticSource(cfg.table_sizes, 7, seed=3, rank=0, steps_per_epoch=1).batch(0, 0)
    return ours, stock, batch


@pytest.mark.parametrize("interaction", ["dot", "dcn"])
def test_lookup_first_forward_computes_exactly_torchrec_dlrm(interaction):
    ours, stock, batch = _ours_and_stock(interaction)
    assert torch.equal(ours(batch.dense_features, batch.sparse_features),
                       stock(batch.dense_features, batch.sparse_features))


class _PlanOrder(torch.nn.Module):
    """An EmbeddingBagCollection whose pooled columns come in another order, as under DMP,
    where they follow the sharding plan (which changes with the world size)."""

    def __init__(self, ebc: EmbeddingBagCollection, order: list) -> None:
        super().__init__()
        self.ebc = ebc
        self.order = order

    def forward(self, features):
        pooled = self.ebc(features).to_dict()
        return KeyedTensor.from_tensor_list(self.order, [pooled[key] for key in self.order])


@pytest.mark.parametrize("interaction", ["dot", "dcn"])
def test_pooled_embeddings_are_read_by_feature_name_whatever_the_plan_order(interaction):
    ours, stock, batch = _ours_and_stock(interaction)
    in_order = ours(batch.dense_features, batch.sparse_features)

    names = ours.sparse_arch.sparse_feature_names
    shuffled = [names[i] for i in torch.randperm(len(names), generator=torch.Generator().manual_seed(0))]
    for model in (ours, stock):
        model.sparse_arch.embedding_bag_collection = _PlanOrder(model.sparse_arch.embedding_bag_collection,
                                                                shuffled)
    permuted = ours(batch.dense_features, batch.sparse_features)
    assert torch.equal(permuted, stock(batch.dense_features, batch.sparse_features))  # TorchRec reads by name
    assert torch.equal(permuted, in_order)


def test_the_planner_is_told_each_multi_hot_features_ids_per_sample():
    """MLPerf's feature 20 reads 100 ids per sample, feature 0 three: the planner's cost
    estimates (and so its plan) see that, as in the reference's dlrm_main.py; one-hot data
    keeps torchrec's default of one."""
    from trainer.distributed import pooling_factors, sharding_constraints
    from trainer.data.batch import SPARSE_KEYS

    sizes = [3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1]
    cfg = parse_config(["--num_embeddings", "64", "--embedding_dim", "8",
                        "--dense_arch_layer_sizes", "16,8", "--over_arch_layer_sizes", "8,1",
                        "--multi_hot_sizes", ",".join(map(str, sizes))])
    model = build_model(cfg, torch.device("cpu"))
    constraints = sharding_constraints(model, pooling_factors(cfg))
    for feature, size in zip(SPARSE_KEYS, sizes):
        assert constraints[f"t_{feature}"].pooling_factors == [float(size)]
    one_hot = parse_config(["--num_embeddings", "64", "--embedding_dim", "8",
                            "--dense_arch_layer_sizes", "16,8", "--over_arch_layer_sizes", "8,1"])
    assert pooling_factors(one_hot) is None
    assert {c.pooling_factors[0] for c in sharding_constraints(model, None).values()} == {1.0}
