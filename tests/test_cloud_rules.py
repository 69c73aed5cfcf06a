"""Each cloud's settings rules live beside that cloud's code (infra/aws/rules.py,
infra/azure/rules.py, infra/gcp/rules.py), the shared ones in infra/settings/rules.py, and
`check_all` runs every one of them exactly once: a maintainer changing an AKS rule opens the
Azure package and reads no EKS or GKE rule; `make check` still loads them on
requirements-check.txt alone."""

from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from infra.settings import all_rules, cost_rules, prepare_rules, security_rules
from infra.settings import rules as shared_rules
from infra.settings.loader import settings_and_problems
from tests.harness import PROJECT, stack_config
from tests.test_docs_architecture import imports_of

ROOT = Path(__file__).resolve().parent.parent
CLOUD_RULES = ("infra.aws.rules", "infra.azure.rules", "infra.gcp.rules")
# What `make check` does not install (requirements-check.txt: pydantic and PyYAML only).
HEAVY = ("pulumi", "azure", "boto3", "botocore", "google", "moto", "torch")


def stack_values(stack: str, overrides: dict[str, dict[str, Any]]) -> dict[str, Any]:
    values = {k.removeprefix(f"{PROJECT}:"): v for k, v in stack_config(stack).items()}
    for section, changes in overrides.items():
        values[section] = {**(values.get(section) or {}), **changes}
    return values


@pytest.mark.parametrize("module", CLOUD_RULES)
def test_a_cloud_s_rules_import_no_pulumi_or_cloud_sdk(module: str) -> None:
    """Read from the file, imports inside functions too."""
    path = ROOT / (module.replace(".", "/") + ".py")
    heavy = sorted(m for m in imports_of(path) if m.split(".")[0].startswith(HEAVY))
    assert not heavy, f"{module} imports {heavy}: `make check` installs none of them"


def test_loading_every_cloud_s_rules_loads_nothing_beyond_requirements_check() -> None:
    """As `make check` loads them: a fresh interpreter, every cloud's rules and check_all."""
    script = ("import sys, json\n"
              f"for name in {CLOUD_RULES + ('infra.settings.all_rules',)!r}:\n"
              "    __import__(name)\n"
              "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=True)
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    heavy = [name for name in loaded if name.startswith(HEAVY)]
    assert not heavy, f"loading the rules loaded {heavy}"


def test_check_all_runs_every_rule_of_every_module_once() -> None:
    """A rule written in a cloud's module but left out of its RULES would never run; one listed
    in two places would say its problem twice."""
    modules = [shared_rules, prepare_rules, *map(importlib.import_module, CLOUD_RULES)]
    for module in modules:
        written = {name for name, obj in vars(module).items()
                   if inspect.isfunction(obj) and obj.__module__ == module.__name__
                   and not name.startswith("_")
                   and inspect.signature(obj).return_annotation == "Iterator[Problem]"}
        listed = {rule.__name__ for rule in module.RULES if rule.__module__ == module.__name__}
        assert written == listed, (f"{module.__name__}: written but not in RULES "
                                   f"{sorted(written - listed)}, listed but not written "
                                   f"{sorted(listed - written)}")
    expected = [rule for module in modules for rule in module.RULES]
    expected += [*security_rules.SECURITY_RULES, *cost_rules.COST_RULES]
    assert list(all_rules.every_rule()) == expected
    assert len(set(all_rules.every_rule())) == len(all_rules.every_rule()), "a rule runs twice"


@pytest.mark.parametrize(("stack", "overrides", "path", "module"), [
    ("azure", {"sharedFileSystem": {"volumeSizeGib": 10}}, "sharedFileSystem.volumeSizeGib",
     "infra.azure.rules"),
    ("aws", {"sharedFileSystem": {"capacityGib": 1000}}, "sharedFileSystem.capacityGib",
     "infra.aws.rules"),
    ("gcp", {"sharedFileSystem": {"capacityGib": 100}}, "sharedFileSystem.capacityGib",
     "infra.gcp.rules"),
    # an EKS-only setting on GKE: refused by EKS's rule, which runs on every stack
    ("gcp", {"kubernetes": {"extendedSupport": True}}, "kubernetes.extendedSupport",
     "infra.aws.rules"),
    ("azure", {"job": {"nodes": 99}}, "job.nodes", "infra.settings.rules"),
], ids=["aks-netapp-volume", "eks-fsx-size", "gke-filestore-size", "eks-only-on-gke",
        "shared-job-size"])
def test_the_rule_that_refuses_a_cloud_s_setting_lives_beside_that_cloud(
        stack: str, overrides: dict[str, dict[str, Any]], path: str, module: str) -> None:
    settings, problems = settings_and_problems(stack_values(stack, overrides))
    assert settings is not None and [p.path for p in problems] == [path]
    refusing = {rule.__module__ for rule in all_rules.every_rule()
                if any(p.path == path for p in rule(settings))}
    assert refusing == {module}
