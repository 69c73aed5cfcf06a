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
