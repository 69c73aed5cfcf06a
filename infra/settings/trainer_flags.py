"""`job.trainerArgs` judged by the trainer itself, before any node is paid for.

The pod runs `python -m trainer ... --<key>=<value>` (workloads/flags.py); a flag the trainer
does not have, a value its argparse type or choices refuse, or a combination its
`TrainConfig.__post_init__` refuses, fails the pod only after the nodes have been provisioned
(25-40 minutes). Here the same parser (`trainer.config.build_parser`) and the same checks
(`TrainConfig`) run on the same text, so nothing is copied and nothing can drift.
trainer/config.py and what it imports are torch-free (trainer.data.layout, trainer.sizing).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import difflib
import functools
import os
import re
import shlex
from collections.abc import Iterator, Mapping
from typing import Any

from infra.settings.errors import Problem, rename_commands, rm_command
from infra.settings.model.job import TrainerArgValue
from infra.settings.model.stack_file import Settings
from infra.settings.stack_flags import TRAINER_FLAG, WORKLOAD_OWNED_FLAGS
from trainer.config import TrainConfig, build_parser, closest_flag, recipe_defaults

# A line of TrainConfig's ValueError: "--flag=<repr of value>: what is allowed".
TRAINER_ERROR_LINE = re.compile(r"^--(?P<flag>\w+)=(?P<value>.*?): (?P<allowed>.*)$")
KINDS = {int: "an integer", float: "a number", str: "text"}


def format_value(value: TrainerArgValue) -> str:
    """How argparse in trainer/config.py reads it: lists comma separated, bools lowercase."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def trainer_flag_names() -> list[str]:
    """Every flag trainer/config.py's parser takes, as a key of job.trainerArgs."""
    return [action.dest for action in _trainer_actions().values()]


def _actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {option: action for option, action in parser._option_string_actions.items()
            if option.startswith("--") and action.dest != "help"}


@functools.lru_cache(maxsize=1)
def _trainer_actions() -> dict[str, argparse.Action]:
    """The trainer parser's flags, built once a process: one `pulumi up` or `check` reads them
    some 20 times (every estimate of the run) and argparse's set-up was most of that. Read
    only; _defaults hands out copies of the defaults."""
    return _actions(build_parser())


def _default(action: argparse.Action) -> str:
    """What leaving the flag out means: its default, or for an unset one (None) what the
    trainer does then, in its own help ("default: --num_epochs")."""
    if action.default is not None:
        return f"its default is {format_value(action.default)}"
    text = action.help or ""
    at = text.lower().rfind("default: ")
    if at >= 0:  # "...; default: --num_epochs." -> what the trainer uses instead
        return f"unset by default, when the trainer uses: {text[at + len('default: '):].rstrip('.')}"
    return f"unset by default (--{action.dest}: {text.split('. ')[0].rstrip('.')})"


def _kind(action: argparse.Action) -> str:
    return KINDS.get(action.type, "comma separated integers, e.g. [512, 256, 128]")  # type: ignore[arg-type]


@contextlib.contextmanager
def _world_size(ranks: int) -> Iterator[None]:
    """TrainConfig reads torchrun's WORLD_SIZE (for --global_batch_size): the job's ranks."""
    before = os.environ.get("WORLD_SIZE")
    os.environ["WORLD_SIZE"] = str(ranks)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("WORLD_SIZE", None)
        else:
            os.environ["WORLD_SIZE"] = before


def _converted(args: Mapping[str, TrainerArgValue], actions: Mapping[str, argparse.Action]
               ) -> tuple[dict[str, Any], list[Problem]]:
    """Each flag through the trainer's own argparse action: its name, type and choices."""
    values: dict[str, Any] = {}
    problems = []
    for key, value in args.items():
        path = f"job.trainerArgs.{key}"
        action = actions.get(f"--{key}")
        if action is None:
            close = closest_flag(key, [a.dest for a in actions.values()])
            hint = (f"did you mean {close!r}? {rename_commands(path, f'job.trainerArgs.{close}', value)}; "
                    if close else "")
            if close in WORKLOAD_OWNED_FLAGS:  # renamed, it would be refused as the stack's
                hint = (f"did you mean {close!r}? the stack sets it (from "
                        f"{WORKLOAD_OWNED_FLAGS[close][0]}): remove it with `{rm_command(path)}`; ")
            flags = "the trainer's flags: `.venv/bin/python -m trainer --help` (trainer/config.py)"
            problems.append(Problem(path, value, f"not a trainer flag; {hint}{flags}",
                                    reason=f"not a trainer flag; did you mean {close!r}? "
                                    + (f"the stack sets it (from {WORKLOAD_OWNED_FLAGS[close][0]}); "
                                       if close in WORKLOAD_OWNED_FLAGS else "") + flags
                                    if close else ""))
            continue
        text = format_value(value)
        try:
            converted = action.type(text) if callable(action.type) else text
        except (ValueError, TypeError, argparse.ArgumentTypeError):
            placeholder = {int: "<integer>", float: "<number>"}.get(action.type, "<value>")  # type: ignore[call-overload]
            refused = (f"{_kind(action)}: the trainer reads --{key}={text} and refuses it; "
                       f"{_default(action)}")
            problems.append(Problem(path, value, f"{refused}; set it with `pulumi config set "
                                    f"--path {shlex.quote(path)} {placeholder}` or remove it with "
                                    f"`{rm_command(path)}`", reason=refused))
            continue
        if action.choices is not None and converted not in action.choices:
            choices = ", ".join(repr(c) for c in action.choices)
            close = difflib.get_close_matches(str(converted), [str(c) for c in action.choices], n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            problems.append(Problem(path, value, f"{hint}one of {choices} (--{key} in "
                                    "trainer/config.py)"))
            continue
        values[key] = converted
    return values, problems


def parsed_trainer_args(args: Mapping[str, TrainerArgValue]) -> dict[str, Any]:
    """job.trainerArgs as the pod's argparse turns them into values (`512,256,128` and
    [512, 256, 128] both a list, `1` a one-item list for a list flag). Keys the trainer refuses
    are left out (trainer_args_fit_the_trainer names them)."""
    return _converted(args, _trainer_actions())[0]


def trainer_flags_in_effect(args: Mapping[str, TrainerArgValue]) -> dict[str, Any]:
    """Every trainer flag's value as the pod's trainer will take it: what every estimate of the
    job reads (infra/estimate.py, infra/preemption.py)."""
    actions = _trainer_actions()
    return _in_effect(_converted(args, actions)[0], _defaults(actions))


def _defaults(actions: Mapping[str, argparse.Action]) -> dict[str, Any]:
    return {action.dest: copy.deepcopy(action.default) for action in actions.values()}


def _in_effect(given: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The trainer's defaults, under a --recipe's values for the flags not given (as
    parse_config applies them: trainer/config.py recipe_defaults), under the given flags."""
    recipe = given.get("recipe") or ""
    return {**defaults, **(recipe_defaults(recipe, set(given), None) if recipe else {}), **given}


def _combination_problems(given: dict[str, Any], defaults: dict[str, Any], ranks: int,
                          args: Mapping[str, TrainerArgValue]) -> list[Problem]:
    """TrainConfig's own checks (ranges, combinations) on what the pod would parse: the
    trainer's defaults, under a --recipe's values, under the user's flags."""
    recipe = given.get("recipe") or ""
    values = _in_effect(given, defaults)
    problems: list[Problem] = []
    for _ in range(2):
        try:
            with _world_size(ranks):
                TrainConfig(**values)
            return problems
        except ValueError as error:
            lines = str(error).splitlines()[1:]
        retry = False
        for line in (line.strip() for line in lines):
            match = TRAINER_ERROR_LINE.match(line)
            if match is None:
                continue
            flag = match["flag"]
            if flag == "global_batch_size" and flag not in given:
                # A recipe's global batch on ranks that do not divide it: the
                # mlperf_recipe_keeps_its_global_batch rule names job.nodes. Look past it.
                values["global_batch_size"], retry = None, True
                continue
            reason = ""
            if flag in args:
                value: Any = args[flag]
                allowed = match["allowed"]
            else:
                source = f"recipe {recipe}'s value" if recipe and flag in recipe_defaults(recipe, set(), None) \
                    else "the trainer's default"
                value = None
                reason = f"{source} is {match['value']}, and {match['allowed']} (trainer/config.py)"
                allowed = (f"{source} is {match['value']}, and {match['allowed']}: set "
                           f"job.trainerArgs.{flag}")
            problems.append(Problem(f"job.trainerArgs.{flag}", value,
                                    f"{allowed} (trainer/config.py)", reason=reason))
        if not retry:
            return problems
    return problems


def trainer_args_fit_the_trainer(s: Settings) -> Iterator[Problem]:
    """Names, types, choices, ranges and combinations of job.trainerArgs, as the trainer
    judges them; flags the stack owns or misshapen names are left to trainer_args_are_flags."""
    actions = _trainer_actions()
    args = {key: value for key, value in s.job.trainer_args.items()
            if key not in WORKLOAD_OWNED_FLAGS and TRAINER_FLAG.match(key)}
    given, problems = _converted(args, actions)
    yield from problems
    # The trainer's own checks on the flags that converted, the refused ones left at their
    # defaults, so one run names a bad range beside a bad choice; nothing more is said about
    # a refused flag itself.
    refused = {problem.path for problem in problems}
    yield from (problem for problem in _combination_problems(
        given, _defaults(actions), s.job.nodes * s.job.processes_per_node, args)
        if problem.path not in refused)
