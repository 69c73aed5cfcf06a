"""docs/architecture.md stays true: its links resolve inside the repository, it describes every
field of the cluster contract (and none that is gone), and the layering it states holds in the
code's imports."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

import infra.contract as contract
from tests.test_imports import FLOORS, allowed_directions, floor_arrows

ROOT = Path(__file__).resolve().parent.parent
DOC_PATH = ROOT / "docs" / "architecture.md"
DOC = DOC_PATH.read_text()
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
EXTERNAL = ("http://", "https://", "mailto:")
CONTRACT_HEADING = "## The cluster contract"
CLOUD_SDKS = ("pulumi_aws", "pulumi_eks", "pulumi_azure_native", "pulumi_gcp")
CLOUD_PACKAGES = ("infra.aws", "infra.azure", "infra.gcp")
# What the trainer's image must never need: the layers above it (the sizing advisor that reads
# the machine table is the command line's `plan`, torchrec_cloud/plan.py).
ABOVE_THE_TRAINER = ("infra", "workloads", "torchrec_cloud")


def contract_classes() -> dict[str, set[str]]:
    """Every dataclass infra/contract.py defines, with its field names."""
    return {name: {f.name for f in dataclasses.fields(obj)}
            for name, obj in vars(contract).items()
            if dataclasses.is_dataclass(obj) and obj.__module__ == contract.__name__}


def contract_section() -> str:
    assert CONTRACT_HEADING in DOC, f"docs/architecture.md lost its {CONTRACT_HEADING!r} section"
    after = DOC.split(CONTRACT_HEADING, 1)[1]
    return after.split("\n## ", 1)[0]


def cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def names_in(cell: str) -> set[str]:
    return set(re.findall(r"`([a-z_][a-z0-9_]*)`", cell))


def test_every_relative_link_resolves_inside_the_repository() -> None:
    targets = [t for t in LINK.findall(DOC) if not t.startswith(EXTERNAL) and not t.startswith("#")]
    assert targets, "no relative link found: the pattern no longer matches the document"
    broken = []
    for target in targets:
        path = (DOC_PATH.parent / target.split("#", 1)[0]).resolve()
        if not path.is_relative_to(ROOT) or not path.exists():
            broken.append(target)
    assert not broken, f"links that do not resolve to a file of the repository: {broken}"


def test_every_contract_field_is_described() -> None:
    section = contract_section()
    missing = [f"{cls}.{field}" for cls, fields in contract_classes().items()
               for field in sorted(fields) if f"`{field}`" not in section]
    missing += [cls for cls in contract_classes() if f"`{cls}`" not in section]
    assert not missing, f"infra/contract.py has what docs/architecture.md does not describe: {missing}"


def test_the_contract_tables_name_only_real_fields() -> None:
    """A field removed from the contract cannot linger in the document's tables."""
    classes = contract_classes()
    current, kind, checked, stale = None, None, 0, []
    for line in contract_section().splitlines():
        bold = re.match(r"\*\*`(\w+)`\*\*", line)
        if bold:
            current = bold.group(1)
        if not line.startswith("|"):
            kind = None
            continue
        row = cells(line)
        if kind is None:  # the header row
            kind = "class" if row[:2] == ["class", "field"] else "field" if row[0] == "field" else "other"
            continue
        if set(row[0]) <= set("-: "):  # the delimiter row
            continue
        if kind == "field" and current in classes:
            owner, named = current, names_in(row[0])
        elif kind == "class" and row[0].strip("`") in classes:
            owner, named = row[0].strip("`"), names_in(row[1])
        else:
            continue
        checked += 1
        stale += [f"{owner}.{name}" for name in sorted(named - classes[owner])]
    assert checked >= len(classes["GpuCluster"]), "the contract tables were not found"
    assert not stale, f"docs/architecture.md describes fields the contract no longer has: {stale}"


def imports_of(path: Path) -> set[str]:
    """Absolute modules a file imports, at any depth (function-level imports included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def under(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def python_files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("folder", ["workloads", "infra", "trainer"])
def test_nothing_climbs_back(folder: str) -> None:
    """The layering docs/architecture.md states, read from the code's imports."""
    wrong = []
    for path in python_files(folder):
        relative = path.relative_to(ROOT).as_posix()
        for module in imports_of(path):
            if folder == "workloads":
                bad = under(module, CLOUD_SDKS + CLOUD_PACKAGES)
            elif folder == "infra":
                in_cloud = relative.startswith(tuple(p.replace(".", "/") + "/" for p in CLOUD_PACKAGES))
                bad = under(module, ("workloads",)) or (under(module, CLOUD_SDKS) and not in_cloud)
            else:
                bad = module.split(".")[0].startswith("pulumi") or under(module, ABOVE_THE_TRAINER)
            if bad:
                wrong.append(f"{relative} imports {module}")
    assert not wrong, "imports that break the layering of docs/architecture.md:\n  " + "\n  ".join(wrong)


def test_the_trainer_imports_nothing_above_it() -> None:
    """Every module under trainer/, at any depth and inside functions too, imports neither
    infra/, workloads/ nor the command line: the container's package stands alone."""
    files = python_files("trainer")
    assert len(files) > 20, "trainer/ was not found"
    wrong = [f"{path.relative_to(ROOT).as_posix()} imports {module}"
             for path in files for module in sorted(imports_of(path))
             if under(module, ABOVE_THE_TRAINER)]
    assert not wrong, "trainer/ reaches above itself:\n  " + "\n  ".join(wrong)


HOUSE_HEADING = "## The house: floors and arrows"
TABLE_HEADING = "## To change X, open Y"
MERMAID = re.compile(r"```mermaid\n(.*?)```", re.S)
ARROW = re.compile(r"^\s*(\w+)\s*-->\s*(\w+)\s*$", re.M)
# The common changes the table must answer (issue 34), each by the words of its first cell.
CHANGES = ("add a GPU machine", "a cloud rule (AKS / EKS / GKE)", "a rule every cloud shares",
           "a stack-owned trainer flag", "a waiting reason", "a command-line verb", "a cloud")


def section(heading: str) -> str:
    assert heading in DOC, f"docs/architecture.md lost its {heading!r} section"
    return DOC.split(heading, 1)[1].split("\n## ", 1)[0]


def test_the_diagram_draws_exactly_the_floors_and_arrows_the_import_test_allows() -> None:
    [diagram] = MERMAID.findall(section(HOUSE_HEADING))
    assert diagram.lstrip().startswith("flowchart"), "the diagram is not a Mermaid flowchart"
    drawn = set(ARROW.findall(diagram))
    assert {floor for arrow in drawn for floor in arrow} == set(FLOORS)
    assert drawn == allowed_directions(), (
        f"drawn but not allowed: {sorted(drawn - allowed_directions())}; "
        f"allowed but not drawn: {sorted(allowed_directions() - drawn)}")
    # and the code crosses no floor the diagram does not draw
    assert floor_arrows() <= drawn, sorted(floor_arrows() - drawn)


def table_rows() -> dict[str, str]:
    rows = [cells(line) for line in section(TABLE_HEADING).splitlines() if line.startswith("|")]
    return {row[0]: row[1] for row in rows[2:]}  # past the header and delimiter rows


def test_the_change_table_answers_every_common_change() -> None:
    missing = [change for change in CHANGES if change not in table_rows()]
    assert not missing, f"docs/architecture.md's table does not say where to: {missing}"


def test_every_path_the_change_table_names_exists() -> None:
    named = []
    for change, where in table_rows().items():
        paths = [(DOC_PATH.parent / target).resolve() for target in LINK.findall(where)]
        assert paths, f"the row {change!r} names no file"
        named += [(change, path) for path in paths]
    gone = [f"{change}: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}"
            for change, path in named if not path.is_relative_to(ROOT) or not path.exists()]
    assert not gone, "the table names files that do not exist:\n  " + "\n  ".join(gone)


def test_a_cloud_rule_is_opened_beside_its_cloud() -> None:
    """"A new AKS rule" opens infra/azure/rules.py, not a file holding every cloud's rules; the
    diagram's infra floor says each cloud package holds its rules."""
    row = table_rows()["a cloud rule (AKS / EKS / GKE)"]
    opened = {(DOC_PATH.parent / target).resolve().relative_to(ROOT).as_posix()
              for target in LINK.findall(row)}
    for cloud in ("aws", "azure", "gcp"):
        assert f"infra/{cloud}/rules.py" in opened, f"the cloud rule row does not open {cloud}'s rules"
    assert "infra/settings/rules.py" not in opened
    infra_floor = next(line for line in MERMAID.findall(section(HOUSE_HEADING))[0].splitlines()
                       if line.strip().startswith("infra["))
    assert re.search(r"per cloud.*rules", infra_floor), infra_floor


def test_the_command_table_lists_exactly_the_verbs_of_the_command_line() -> None:
    """The table of `torchrec-cloud <command>`s has one row per verb of COMMANDS in
    torchrec_cloud/__main__.py: a verb added or removed there shows here."""
    from torchrec_cloud.__main__ import COMMANDS

    header = "| command | reads | says / does |"
    assert header in DOC, "docs/architecture.md lost its command table"
    table = DOC.split(header, 1)[1].split("\n\n", 1)[0]
    rows = [cells(line) for line in table.strip().splitlines()[1:]]  # past the delimiter row
    listed = [re.match(r"`([a-z]+)", row[0]).group(1) for row in rows]  # type: ignore[union-attr]
    assert sorted(listed) == sorted(COMMANDS), (sorted(listed), sorted(COMMANDS))


def test_a_stack_owned_flag_row_opens_every_file_a_new_flag_touches() -> None:
    """A new stack-owned flag: the trainer's parser, the settings' list, its value; a per-job
    one reaches submitted jobs through stack_flags, with no second derivation to edit."""
    row = table_rows()["a stack-owned trainer flag"]
    opened = {(DOC_PATH.parent / target).resolve().relative_to(ROOT).as_posix()
              for target in LINK.findall(row)}
    assert {"trainer/config.py", "infra/settings/stack_flags.py", "workloads/flags.py"} <= opened
    assert "`stack_flags`" in row and "`PER_JOB_FLAGS`" in row
    # a gate flag that follows the node count has one list, and the multi-hot flags' owner
    assert "`gang_gate_flags`" in row and "`prepare_owns_the_multi_hot_flags`" in row
    assert "infra/settings/prepare_rules.py" in opened


def opened_by(change: str) -> set[str]:
    return {(DOC_PATH.parent / target).resolve().relative_to(ROOT).as_posix()
            for target in LINK.findall(table_rows()[change])}


def test_a_waiting_reason_opens_its_name_its_evidence_its_order_and_its_fixtures() -> None:
    """A new waiting reason touches `Kind` (verdict.py), an evidence module, `RULES` (decide.py,
    the only order), and, for evidence not read yet, view.py, why.py's read_view and the
    recorded objects the tests feed it."""
    opened = opened_by("a waiting reason")
    for path in ("workloads/waiting/verdict.py", "workloads/waiting/decide.py",
                 "workloads/waiting/view.py", "workloads/why.py", "tests/waiting_fixtures.py"):
        assert path in opened, f"the waiting reason row does not open {path}"
    row = table_rows()["a waiting reason"]
    assert "`RULES`" in row and "`Kind`" in row and "`read_view`" in row


def test_a_waiting_reason_read_from_a_cloud_s_refusal_opens_its_patterns_and_its_step() -> None:
    """A quota or stock-out reason is told apart by the cloud's own words (cloud_errors.py) and
    answered per cloud (cloud_steps.py): the row names both."""
    opened = opened_by("a waiting reason")
    assert {"workloads/cloud_errors.py", "workloads/waiting/cloud_steps.py"} <= opened
    row = table_rows()["a waiting reason"]
    assert "`Refusal`" in row and "`PATTERNS`" in row


def test_a_cloud_rule_row_opens_where_its_cases_and_a_new_setting_live() -> None:
    """Rule cases live in tests/test_settings.py's BAD table; a new setting is a field of its
    section's module of the settings model (infra/settings/model/) and regenerated docs."""
    opened = opened_by("a cloud rule (AKS / EKS / GKE)")
    assert {"tests/test_settings.py", "infra/settings/model"} <= opened
    row = table_rows()["a cloud rule (AKS / EKS / GKE)"]
    assert "`BAD`" in row and "`make settings-docs`" in row


def test_a_command_line_verb_row_opens_every_place_that_names_the_verbs() -> None:
    """COMMANDS is the one list; the README's list and this file's command table are held to it
    by tests, so the row names them and those tests."""
    from torchrec_cloud.__main__ import COMMANDS

    assert COMMANDS
    opened = opened_by("a command-line verb")
    assert {"torchrec_cloud/__main__.py", "README.md", "tests/test_cli.py", "tests/test_readme.py",
            "tests/test_docs_architecture.py"} <= opened
    assert "`COMMANDS`" in table_rows()["a command-line verb"]


def test_the_contract_links_each_cloud_s_shared_file_system_module() -> None:
    """One file per shared file system in every cloud package: fsx.py, netapp.py, filestore.py."""
    [row] = [line for line in contract_section().splitlines()
             if line.startswith("| `shared_file_system` |")]
    linked = {(DOC_PATH.parent / target).resolve().relative_to(ROOT).as_posix()
              for target in LINK.findall(row)}
    assert linked == {"infra/aws/fsx.py", "infra/azure/netapp.py", "infra/gcp/filestore.py"}


def test_adding_a_gpu_machine_names_every_place_the_catalog_does_not_hold() -> None:
    """The catalog's machine table and GPU models, the one table kept by a name it gives (the
    EC2 Spot quota names), and the generated pages `make settings-docs` rewrites from the
    catalog."""
    row = table_rows()["add a GPU machine"]
    opened = opened_by("add a GPU machine")
    assert {"infra/catalog/machines.py", "infra/catalog/gpus.py",
            "workloads/waiting/cloud_steps.py", "docs/interconnect.md", "docs/spot.md"} <= opened
    assert "`make settings-docs`" in row and "`AWS_SPOT_P_QUOTAS`" in row
    # Azure ND: the InfiniBand facts are the catalog's; a new topology family is an image file
    assert "`ib_hcas`" in row and "`azure_topology`" in row and "trainer/Dockerfile" in opened
