"""The one list of rules `check_all` runs: the shared and per-cloud ones (infra/settings/rules.py,
with security_rules.py) and those that need a price or a size (infra/settings/cost_rules.py).

Collected here, above both, because the cost rules import the figures (infra/estimate.py,
infra/preemption.py) that themselves read infra/settings/rules.py.
"""

from __future__ import annotations

from infra.settings.cost_rules import COST_RULES
from infra.settings.errors import Problem
from infra.settings.model import Settings
from infra.settings.rules import RULES as SHARED_RULES, Rule

RULES: tuple[Rule, ...] = (*SHARED_RULES, *COST_RULES)


def check_all(settings: Settings) -> list[Problem]:
    """Every problem every rule finds."""
    return [problem for rule in RULES for problem in rule(settings)]
