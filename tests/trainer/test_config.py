"""Flags: every flag documented, bad values rejected before any work starts."""

import subprocess
import sys

import pytest

from tests.trainer.helpers import REPO, env
from trainer.config import FlagError, TrainConfig, build_parser, config_from_flags, parse_config
import dataclasses

SEED_GUIDE_FLAGS = ["--num_embeddings_per_feature", "--num_embeddings", "--embedding_dim",
                    "--dense_arch_layer_sizes", "--over_arch_layer_sizes", "--batch_size",
                    "--learning_rate", "--num_epochs", "--dataset_path", "--max_steps", "--seed",
                    "--interaction", "--checkpoint_dir", "--checkpoint_every", "--keep_checkpoints",
                    "--eval_every", "--metrics_file", "--tensorboard_dir", "--log_every"]


def test_help_documents_every_flag_including_the_seed_guide_names():
    text = build_parser().format_help()
    for f in dataclasses.fields(TrainConfig):
        assert f"--{f.name}" in text
        assert f.metadata["help"]
    for flag in SEED_GUIDE_FLAGS:
        assert flag in text


def test_defaults_are_the_criteo_dlrm_layout():
    cfg = parse_config([])
    assert cfg.table_sizes == [100_000] * 26
    assert cfg.dense_arch_layer_sizes[-1] == cfg.embedding_dim
    assert cfg.interaction == "dot"


@pytest.mark.parametrize("argv, named", [
    (["--batch_size", "0"], "--batch_size=0"),
    (["--num_embeddings_per_feature", "10,20"], "--num_embeddings_per_feature"),
    (["--dense_arch_layer_sizes", "32,16"], "--embedding_dim"),
    (["--over_arch_layer_sizes", "32,2"], "--over_arch_layer_sizes"),
    (["--checkpoint_every", "10"], "needs --checkpoint_dir"),
    (["--checkpoint_dir", "ftp://host/x"], "--checkpoint_dir"),
    (["--dataset_path", "/nonexistent/criteo"], "no such file"),
    (["--interaction", "cross"], "invalid choice"),
    (["--multi_hot_sizes", "3,2,1"], "--multi_hot_sizes='3,2,1': needs exactly 26"),
    (["--multi_hot_distribution_type", "zipf"], "invalid choice"),
    (["--dense_arch_layer_sizes", "a,b"], "comma separated integers"),
    (["--eval_batches", "-2"], "--eval_batches=-2: 0 (none), -1 (all)"),
    (["--eval_every", "5", "--evals_per_epoch", "20"], "set either it or --eval_every"),
    (["--validation_auroc", "0.8"], "needs evaluations during training"),
    (["--validation_auroc", "1.5", "--eval_every", "5"], "an AUC in (0, 1]"),
    (["--recipe", "mlperf", "--global_batch_size", "1000"], "multiple of the world size (16"),
    (["--recipe", "dlrm"], "invalid choice"),
])
def test_bad_flags_fail_with_a_message_naming_the_flag(argv, named, capsys, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "16")  # torchrun's: 2 nodes of 8
    with pytest.raises(SystemExit) as exit_info:
        parse_config(argv)
    assert exit_info.value.code == 2
    assert named in capsys.readouterr().err


def test_bad_flags_fail_fast_from_the_command_line():
    proc = subprocess.run([sys.executable, "-m", "trainer", "--batch_size", "-1", "--keep_checkpoints", "0"],
                          cwd=REPO, env=env(), capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert "--batch_size=-1" in proc.stderr and "--keep_checkpoints=0" in proc.stderr


@pytest.mark.parametrize("argv, line", [
    # A shortened flag is refused, as `make check` refuses it in job.trainerArgs: argparse
    # would otherwise take --max_step for --max_steps (allow_abbrev).
    (["--max_step", "20"], "--max_step='20': not a trainer flag; did you mean --max_steps?"),
    (["--maxsteps=20"], "--maxsteps='20': not a trainer flag; did you mean --max_steps?"),
    (["--eval-batches", "-1"], "--eval-batches='-1': not a trainer flag; did you mean --eval_batches?"),
])
def test_an_unknown_or_shortened_flag_is_refused_on_one_line_with_the_flag_it_meant(argv, line, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_config(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err == f"python -m trainer: error: {line} python -m trainer --help lists them\n"
    assert build_parser().allow_abbrev is False


def test_a_launcher_checks_the_global_batch_on_the_ranks_it_will_start(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)  # before torchrun: no WORLD_SIZE yet
    assert config_from_flags(["--global_batch_size", "256"], world_size=2).batch_size == 128
    with pytest.raises(FlagError, match=r"--global_batch_size=255: .* world size \(2 ranks\)"):
        config_from_flags(["--global_batch_size", "255"], world_size=2)
