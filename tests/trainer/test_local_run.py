"""`make train`: torchrun on 2 CPU processes (or every GPU), brief synthetic run, extras last."""

from trainer import local_run


def test_local_run_launches_two_gloo_processes_and_passes_extra_flags_last(monkeypatch):
    monkeypatch.setattr(local_run.torch.cuda, "device_count", lambda: 0)
    cmd = local_run.command("out/local/x", ["--max_steps", "7"])
    assert cmd[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    assert cmd[5:7] == ["-m", "trainer"]
    assert cmd[-2:] == ["--max_steps", "7"]  # argparse keeps the last value: the user's
    assert "--checkpoint_dir" in cmd and "--metrics_file" in cmd


def test_local_run_uses_every_gpu(monkeypatch):
    monkeypatch.setattr(local_run.torch.cuda, "device_count", lambda: 8)
    assert "--nproc_per_node=8" in local_run.command("out/local/x", [])
