"""torchrec-cloud: check, deploy-side pre-flight, run and follow training jobs on a stack.

`torchrec-cloud <command>` (or `python -m torchrec_cloud <command>`): one entry point, each
command in its own module.

A command's module is imported only when it is run, so `check` needs neither kubectl nor the
clouds' storage libraries, and `status` does not import Pulumi.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from typing import Sequence

# command -> (module, one-line help). Each module has add_arguments(parser) and run(args) -> int.
COMMANDS = {
    "check": ("torchrec_cloud.check", "validate a stack file and estimate its cost, before paying"),
    "status": ("torchrec_cloud.status", "nodes, the gang, progress, checkpoints and spend of a stack"),
    "logs": ("torchrec_cloud.logs", "the training job's log (rank 0, or every pod)"),
    "tensorboard": ("torchrec_cloud.tensorboard", "TensorBoard on this machine over the job's events"),
    "why": ("torchrec_cloud.why", "why a job of the stack is not running, and the next step"),
    "plan": ("torchrec_cloud.plan", "the time-to-train and cost of a table set on a machine, offline"),
    "submit": ("torchrec_cloud.submit", "queue another training job on the stack's cluster"),
    "list": ("torchrec_cloud.jobs", "every job of the stack: state, step, eval AUC, GPU-hours, cost"),
    "cancel": ("torchrec_cloud.cancel", "stop a submitted job (it saves a final checkpoint)"),
    "cost": ("torchrec_cloud.cost", "what the stack cost: per job, and fixed items per day"),
    "doctor": ("torchrec_cloud.doctor", "before `pulumi up`: tools, sign-in, address, quotas"),
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="torchrec-cloud", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="command")
    modules = {}
    wanted = (list(argv) if argv is not None else sys.argv[1:])[:1]
    for name, (module_name, help_text) in COMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        if name in wanted:  # only the command being run is imported
            modules[name] = importlib.import_module(module_name)
            modules[name].add_arguments(sub)
    args = parser.parse_args(argv)
    return int(modules[args.command].run(args))


# torch and torchrec come with the trainer's install (`make train`: trainer/requirements-*.txt).
TRAINER_MODULES = ("torch", "torchrec", "fbgemm_gpu")
# The install that brings every module a verb imports, and the make target that installs it
# (tests/test_cli.py asserts each verb runs on it): `check` requirements-check.txt; the verbs
# that follow a deployed stack requirements-cli.txt (`make cli`; `make status` and `make doctor`
# are the same set). `submit` renders with the stack's own code (workloads/ on the Pulumi SDK),
# `tensorboard` serves with TensorBoard, `plan` plans with torchrec: each names its packages.
VERB_INSTALLS = {"check": ("requirements-check.txt", "check STACK={stack}"),
                 "status": ("requirements-cli.txt", "status STACK={stack}"),
                 "doctor": ("requirements-cli.txt", "doctor STACK={stack}"),
                 **{verb: ("requirements-cli.txt", "cli")
                    for verb in ("list", "cancel", "cost", "logs", "why")}}
# submit's packages beyond requirements-cli.txt (about 100 MB, not in `make status`'s set).
SUBMIT_PACKAGES = ("pulumi", "pulumi-kubernetes")
FULL_INSTALL = "requirements-dev.txt"


def _stack_of(argv: Sequence[str]) -> str:
    """The --stack the command was given, for a make command that works as printed."""
    for index, word in enumerate(argv):
        if word.startswith("--stack="):
            return word.split("=", 1)[1]
        if word == "--stack" and index + 1 < len(argv):
            return argv[index + 1]
    return "aws"


def missing_module_hint(name: str, verb: str | None = None, argv: Sequence[str] = ()) -> str:
    """What to install for a module this venv lacks, named by the install that brings it for
    this verb, as a command that works as printed here (this Python's pip, the file's path)."""
    from torchrec_cloud.invocation import make, pins, pip_install, requirements

    if name.split(".")[0] in TRAINER_MODULES:
        return (f"this command needs {name!r} (torch and torchrec, the trainer's planner): "
                f"`{make('train')}` installs them into .venv (CPU-only torch: "
                f"`{make('train')} PIP_EXTRA=\"--extra-index-url "
                "https://download.pytorch.org/whl/cpu\"`)")
    if verb == "submit" and name.split(".")[0] in ("pulumi", "pulumi_kubernetes"):
        return (f"submit renders the job with the stack's own code (workloads/, on the Pulumi "
                f"SDK), which needs {name!r}: `{pip_install(pins(*SUBMIT_PACKAGES))}` adds it "
                "(about 100 MB: not in requirements-cli.txt, the light set for status)")
    if verb == "tensorboard" and name.split(".")[0] == "tensorboard":
        pin = pins("tensorboard", file=FULL_INSTALL)
        return f"this command needs {name!r}: `{pip_install(pin)}` adds it"
    requirements_file, target = VERB_INSTALLS.get(verb or "", (FULL_INSTALL, None))
    hint = f"this command needs {name!r}: `{pip_install(requirements(requirements_file))}`"
    if target:
        hint += f" (or `{make(target.format(stack=_stack_of(argv)))}`, which installs it)"
    return hint


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def guarded(argv: Sequence[str] | None = None) -> int:
    """main(), quiet when the reader of stdout goes away (`... check --stack aws | head -1`):
    Python's recipe for SIGPIPE (docs.python.org/3/library/signal.html, "Note on SIGPIPE"):
    point stdout at devnull so the interpreter's last flush cannot raise again, and exit 141
    (128 + SIGPIPE), what a shell reports for a command a closed pipe ended."""
    # SIGTERM ends a command as Ctrl-C does, through its `finally`s: the kubeconfig copy and
    # partial downloads are removed, TensorBoard stopped (Python's default leaves them behind).
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        code = main(argv)
        sys.stdout.flush()
        return code
    except KeyboardInterrupt:
        return 130  # 128 + SIGINT, as a shell reports it
    except ModuleNotFoundError as error:  # a lighter venv: `make check`'s or `make status`'s
        words = list(argv) if argv is not None else sys.argv[1:]
        print(f"torchrec-cloud: {missing_module_hint(error.name or '', *words[:1], argv=words)}",
              file=sys.stderr)
        return 2
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(guarded())
