"""The checkpointer on an fsspec file system (memory://, standing in for s3:// or gs://)."""

import fsspec
import pytest
import torch
import torch.distributed as dist

from trainer.checkpoint import Checkpointer


@pytest.fixture
def world_of_one(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_object_store_checkpoints_commit_on_metadata_keep_newest_and_load(world_of_one):
    fs = fsspec.filesystem("memory")
    ckpt = Checkpointer("memory://bucket/run", keep=2)
    for step in (10, 20, 30):
        assert ckpt.save(step, {"w": torch.full((4,), float(step)), "progress": torch.tensor([step])})
    assert ckpt.complete_steps() == [20, 30]
    assert not ckpt.save(30, {"w": torch.zeros(4), "progress": torch.tensor([0])})  # never overwrite
    fs.pipe("/bucket/run/step-40/__0_0.distcp", b"partial save")  # no .metadata: incomplete
    assert ckpt.latest() == 30
    state = {"w": torch.zeros(4), "progress": torch.tensor([0])}
    ckpt.load(30, state)
    assert torch.equal(state["w"], torch.full((4,), 30.0)) and int(state["progress"]) == 30
