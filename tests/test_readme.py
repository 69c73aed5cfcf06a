"""The README and docs/ tell a newcomer the truth: the README's commands exist, the generated
tables in docs/ are current, and no link points at a file or heading a clone lacks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from infra.settings.docs import PAGES, replace_block

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"
PAGES_WITH_LINKS = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


@pytest.mark.parametrize("page", sorted(PAGES))
def test_generated_tables_match_the_code(page: str) -> None:
    """docs/settings.md (settings model), docs/spot.md and docs/interconnect.md (catalog)."""
    text = (DOCS / page).read_text()
    assert replace_block(page, text) == text, f"docs/{page} is stale: run `make settings-docs`"


def test_a_page_without_its_markers_is_refused_not_appended_to() -> None:
    with pytest.raises(ValueError, match="settings.md lacks the markers"):
        replace_block("settings.md", "# Settings\n")


_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading ids: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    headings = re.findall(r"^#{1,6} +(.+?) *$", _FENCE.sub("", markdown), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def _relative_links(page: Path) -> list[str]:
    text = _FENCE.sub("", page.read_text())  # a shell snippet's [..](..) is not a link
    return [target for target in _LINK.findall(text)
            if not re.match(r"[a-z][a-z0-9+.-]*:", target)]  # https:, mailto: ...


def test_pages_have_relative_links_to_check() -> None:
    """The link test below has something to judge: the README links into docs/."""
    assert any(t.startswith("docs/") for t in _relative_links(ROOT / "README.md"))


@pytest.mark.parametrize("page", PAGES_WITH_LINKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_in_a_clone(page: Path) -> None:
    """Each relative link names a file or folder of the repository (never one outside it, such
    as a shared folder beside the clone) and, with a #fragment into a markdown page, one of its
    headings."""
    broken = []
    for target in _relative_links(page):
        path_part, _, fragment = target.partition("#")
        path = (page.parent / path_part).resolve() if path_part else page
        if ROOT not in path.parents and path != ROOT:
            broken.append(f"{target} (outside the repository)")
        elif not path.exists():
            broken.append(f"{target} (no such file)")
        elif fragment and path.suffix == ".md" and fragment not in _anchors(path.read_text()):
            broken.append(f"{target} (no such heading in {path.relative_to(ROOT)})")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


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
    """The settings each `bash` block of docs/data.md ("Real data") leaves the AWS stack with,
    applying its `pulumi config set` lines (a whole object as JSON, or one --path value) to
    Pulumi.aws.yaml."""
    import json
    import shlex

    from tests.harness import PROJECT, stack_config

    section = (DOCS / "data.md").read_text()
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
    from infra.settings.loader import settings_from_mapping
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


@pytest.mark.parametrize("cloud", ["aws", "azure", "gcp"])
def test_the_readme_cost_table_is_what_the_estimate_says_for_the_shipped_stacks(cloud: str) -> None:
    """README's "What the default job does and costs" table cannot drift from infra/estimate.py:
    each row is the estimate of that cloud's stack file after the README's configure step."""
    from infra.estimate import hourly, run_estimate
    from infra.settings.loader import settings_from_mapping
    from infra.settings.loader import project_values
    from tests.test_check import configured

    settings = settings_from_mapping(project_values(
        {key: value if isinstance(value, str) else json.dumps(value)  # as the Pulumi CLI passes them
         for key, value in configured(cloud).items()}))
    now, run = hourly(settings), run_estimate(settings)
    name = {"aws": "AWS", "azure": "Azure", "gcp": "GCP"}[cloud]
    row = next(line for line in README.splitlines() if line.startswith(f"| {name} |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[2] == f"USD {now.total():.2f}"
    assert cells[3] == f"about USD {now.total(spot=True):.2f}"
    assert cells[4] == f"about {run.hours:.2f} h, USD {run.usd:.0f}"


def test_pulumi_gets_a_virtualenv_of_its_own_that_no_make_target_half_fills() -> None:
    """New-user review A1: `make check` made .venv with the checking set only, Pulumi reused it
    (it installs requirements.txt only into a virtualenv it creates), and `pulumi up` died on
    `import pulumi`. Pulumi's folder is one no make target installs into."""
    import yaml

    options = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["runtime"]["options"]
    makefile = (ROOT / "Makefile").read_text()
    made = set(re.findall(r"^(?:VENV|CHECKOV_VENV) := (\S+)$", makefile, re.M))
    assert made == {".venv", ".venv-checkov"}
    assert options["toolchain"] == "pip" and options["virtualenv"] not in made
    assert f"{options['virtualenv']}/" in (ROOT / ".gitignore").read_text().splitlines()


def test_the_readme_lists_exactly_the_verbs_of_the_command_line() -> None:
    """The README's list of `torchrec-cloud`'s commands is COMMANDS in torchrec_cloud/__main__.py:
    a verb added or removed there shows here."""
    from torchrec_cloud.__main__ import COMMANDS

    found = re.search(r"is your command line, `torchrec-cloud` \(([^)]*)\)", README)
    assert found, "the README lost its list of torchrec-cloud's commands"
    listed = re.findall(r"`([a-z]+)`", found.group(1))
    assert sorted(listed) == sorted(COMMANDS), (sorted(listed), sorted(COMMANDS))


def test_the_user_pages_name_torchrec_cloud_why_and_what_a_dry_run_reads() -> None:
    """Walkthrough 11: docs/azure.md still sent users to `workloads.why`, and the README's
    `submit --dry-run` line read as if it ran offline; it reads the live stack's outputs and its
    own JobSet, or the files given with --outputs and --base."""
    for page in (ROOT / "README.md", DOCS / "aws.md", DOCS / "azure.md", DOCS / "gcp.md"):
        assert "workloads.why" not in page.read_text(), page.name
    dry_runs = [line for line in README.splitlines() if "submit" in line and "--dry-run" in line]
    assert dry_runs
    for line in dry_runs:
        assert "live stack" in line and "--outputs" in line and "--base" in line, line
