"""The one list of rules `check_all` runs: the shared ones (infra/settings/rules.py), the
dataset preparation's (prepare_rules.py), each cloud's beside its code (infra/aws/rules.py,
infra/azure/rules.py, infra/gcp/rules.py), the security ones (security_rules.py) and those that
need a price or a size (cost_rules.py).

Collected here, above them all, because the cost rules import the figures (infra/estimate.py,
infra/preemption.py) that themselves read infra/settings/rules.py, and each cloud's rules import
the shared ones. Every rule runs on every stack: a cloud's rule also refuses its own settings on
another cloud.
"""

from __future__ import annotations

from functools import cache

from infra.aws.rules import RULES as AWS_RULES
from infra.azure.rules import RULES as AZURE_RULES
from infra.gcp.rules import RULES as GCP_RULES
from infra.settings.cost_rules import COST_RULES
from infra.settings.errors import Problem
from infra.settings.model.stack_file import Settings
from infra.settings.prepare_rules import RULES as PREPARE_RULES
from infra.settings.rules import RULES as SHARED_RULES, Rule
from infra.settings.security_rules import SECURITY_RULES


@cache
def every_rule() -> tuple[Rule, ...]:
    """The rules in the order their problems are listed."""
    return (*SHARED_RULES, *PREPARE_RULES, *AWS_RULES, *AZURE_RULES, *GCP_RULES, *SECURITY_RULES,
            *COST_RULES)


def check_all(settings: Settings) -> list[Problem]:
    """Every problem every rule finds."""
    return [problem for rule in every_rule() for problem in rule(settings)]
