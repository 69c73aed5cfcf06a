"""The README tells a newcomer the truth: its commands exist and its settings table is current."""

from __future__ import annotations

import re
from pathlib import Path

from infra.settings.docs import (END, FLOORS_END, FLOORS_START, SPOT_END, SPOT_START, START,
                                 replace_block)

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_settings_table_matches_the_settings_model() -> None:
    assert START in README and END in README
    assert SPOT_START in README and SPOT_END in README  # the spot notices, from the catalog
    assert FLOORS_START in README and FLOORS_END in README  # the fabric gate's floors
    assert replace_block(README) == README, "README settings table is stale: run `make settings-docs`"


def test_the_two_start_commands_are_make_targets() -> None:
    block = README.split("## Start here", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make train", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    for target in ("train", "test"):
        assert re.search(rf"^{target}:", makefile, re.MULTILINE), f"Makefile has no {target} target"


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test$", ci, re.MULTILINE)


def _walk_through_stacks() -> list[dict[str, object]]:
    """The settings each `bash` block of "Real data" leaves the AWS stack with, applying its
    `pulumi config set` lines (a whole object as JSON, or one --path value) to Pulumi.aws.yaml."""
    import json
    import shlex

    from tests.harness import PROJECT, stack_config

    section = README.split("## Real data", 1)[1].split("\n## ", 1)[0]
    stacks = []
    values = {k.removeprefix(f"{PROJECT}:"): v for k, v in stack_config("aws").items()}
    for block in section.split("```bash")[1:]:
        for line in block.split("```", 1)[0].splitlines():
            words = shlex.split(line, comments=True)
            if words[:3] == ["pulumi", "config", "rm"] and "--path" in words:
                *parents, leaf = words[words.index("--path") + 1].split(".")
                node = values
                for part in parents:
                    node = node.setdefault(part, {})
                node.pop(leaf, None)
                continue
            if words[:3] != ["pulumi", "config", "set"] or "--path" not in words:
                if words[:3] == ["pulumi", "config", "set"] and words[-2].startswith(PROJECT):
                    values[words[-2].removeprefix(f"{PROJECT}:")] = json.loads(words[-1])
                continue
            path, text = words[words.index("--path") + 1], words[-1]
            if "$(" in line:
                continue  # the user's own address
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                value = text
            node = values
            *parents, leaf = path.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value
        stacks.append(json.loads(json.dumps(values)))
    return stacks


def test_the_real_data_walk_throughs_make_valid_stacks_with_the_published_sizes() -> None:
    from infra.settings import settings_from_mapping
    from tests.harness import USER_API_CIDRS

    suspended, one_hot, mlperf = _walk_through_stacks()
    # The block that keeps the GPU nodes free while preparing ends with the job unsuspended.
    assert suspended["job"]["suspend"] is False
    sizes = {}
    for name, values in (("one-hot", one_hot), ("mlperf", mlperf)):
        values["kubernetes"]["apiAccessCidrs"] = USER_API_CIDRS
        settings = settings_from_mapping(values)
        assert settings.dataset.prepare.enabled and settings.job.nodes == 2, name
        if name == "one-hot":
            tables = str(settings.job.trainer_args["num_embeddings_per_feature"]).split(",")
            assert len(tables) == 26, name
        sizes[name] = settings
    assert sizes["one-hot"].dataset.prepare.frequency_threshold == 3
    mlperf_settings = sizes["mlperf"]
    assert mlperf_settings.dataset.prepare.max_ind_range == 40_000_000
    assert sum(mlperf_settings.dataset.prepare.multi_hot_sizes or []) == 214
    assert mlperf_settings.dataset.prepare.shuffle
    assert mlperf_settings.job.trainer_args == {"recipe": "mlperf"}  # nothing overrides it
