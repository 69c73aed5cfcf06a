"""Names derived from the project and stack, so two stacks can live in one account."""

from __future__ import annotations

import hashlib
import re

import pulumi

UNIQUE_SUFFIX_LENGTH = 8  # hex characters of the stable hash in globally unique names


def name_prefix(project: str | None = None, stack: str | None = None, max_length: int = 24) -> str:
    """'<project>-<stack>' in lowercase letters, digits and '-', short enough for every cloud."""
    raw = f"{project or pulumi.get_project()}-{stack or pulumi.get_stack()}".lower()
    cleaned = re.sub(r"[^a-z0-9-]+", "-", raw).strip("-")
    return cleaned[:max_length].rstrip("-")


def compact(prefix: str, suffix: str = "", max_length: int = 24) -> str:
    """Letters and digits only (storage accounts, ACR): '<prefix><suffix>', cut to fit."""
    return re.sub(r"[^a-z0-9]", "", f"{prefix}{suffix}".lower())[:max_length]


def stable_hash(*parts: str) -> str:
    """The same short hex string for the same parts on every run (never random, never a date)."""
    digest = hashlib.sha256("/".join(parts).encode()).hexdigest()
    return digest[:UNIQUE_SUFFIX_LENGTH]


def unique_compact(prefix: str, suffix: str, scope: str, max_length: int) -> str:
    """A globally unique letters-and-digits name: '<prefix, cut><suffix><hash of scope>'.

    `scope` names where the resource lives (subscription, project, stack), so two stacks, or the
    same stack in two subscriptions, never collide, while `pulumi up` twice keeps the name.
    """
    room = max_length - len(suffix) - UNIQUE_SUFFIX_LENGTH
    if room < 1:
        raise ValueError(f"suffix {suffix!r} leaves no room in a {max_length}-character name")
    return f"{compact(prefix, max_length=room)}{suffix}{stable_hash(scope)}"


def prefix_was_cut(project: str | None = None, stack: str | None = None,
                   max_length: int = 24) -> bool:
    """True when name_prefix had to cut '<project>-<stack>': then two stacks whose names start
    alike (production-a, production-b) share the prefix."""
    project, stack = project or pulumi.get_project(), stack or pulumi.get_stack()
    full = name_prefix(project, stack, max_length=10_000)
    return name_prefix(project, stack, max_length) != full


def unique_name_prefix(project: str | None = None, stack: str | None = None,
                       max_length: int = 24) -> str:
    """The prefix of a new stack's resource names, within max_length: name_prefix when nothing
    was cut (existing stacks keep their names); '<cut prefix>-<hash of project and stack>' when it
    was, so production-a and production-b never share an EKS cluster, KMS alias, ECR repository,
    log group, GCP service account or Azure resource group."""
    project, stack = project or pulumi.get_project(), stack or pulumi.get_stack()
    prefix = name_prefix(project, stack, max_length)
    if not prefix_was_cut(project, stack, max_length):
        return prefix
    head = name_prefix(project, stack, max_length - UNIQUE_SUFFIX_LENGTH - 1)
    return f"{head}-{stable_hash(project, stack)}"


def resource_prefix(previous_prefix: str | None, live: bool) -> str:
    """This run's resource-name prefix: the one a live stack was deployed with (its
    `name_prefix` output; a stack deployed before that output existed used name_prefix()), since a
    new prefix would replace its cluster; a new stack, or one after destroy, gets
    unique_name_prefix()."""
    if live:
        return previous_prefix or name_prefix()
    return unique_name_prefix()


def stack_unique_prefix(project: str | None = None, stack: str | None = None,
                        max_length: int = 24) -> str:
    """The prefix of globally or account-unique names (checkpoint stores): name_prefix as it was
    when nothing was cut, so existing stacks keep their names; '<cut prefix>-<hash of project
    and stack>' when it was cut, so production-a and production-b never share a name."""
    project, stack = project or pulumi.get_project(), stack or pulumi.get_stack()
    prefix = name_prefix(project, stack, max_length)
    if not prefix_was_cut(project, stack, max_length):
        return prefix
    return f"{prefix}-{stable_hash(project, stack)}"
