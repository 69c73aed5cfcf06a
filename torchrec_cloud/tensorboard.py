"""`python -m torchrec_cloud tensorboard --stack aws`: TensorBoard on this machine over the job's
event files.

The trainer's rank 0 mirrors its TensorBoard event files to
`<checkpoint_uri>/telemetry/tensorboard/` (issue 23's telemetry contract). This copies them to
out/tensorboard/<stack>/ (only files that are new or changed size since the last copy: an
event file grows by appends) and runs TensorBoard from this project's virtual environment
(`sys.executable -m tensorboard.main`, so no `tensorboard` on PATH is needed), copying again
every --sync-every seconds while it runs, so a running job's curves keep growing (TensorBoard
reloads its logdir by itself, every 5 s by default: its --reload_interval). --sync-only copies
and exits.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from torchrec_cloud.local_copy import UnsafeKey, local_path
from torchrec_cloud.stack import (Outputs, StackError, add_stack_arguments, file_name, open_bucket,
                                  read_outputs)
from torchrec_cloud.invocation import pip_install
from torchrec_cloud.child_wait import wait_for_exit

OUT_DIR = Path("out/tensorboard")
SYNC_EVERY_S = 60.0  # the trainer's mirror is written about as often (trainer/telemetry.py)
# How long leaving waits for a copy under way: a Ctrl-C must not wait for a slow download. A copy
# left behind (a daemon thread) leaves at most a .partial file; the next run copies that file.
JOIN_S = 2.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_stack_arguments(parser)
    parser.add_argument("--sync-only", action="store_true", help="copy the event files, do not start TensorBoard")
    parser.add_argument("--port", type=int, default=6006, help="TensorBoard's port (default 6006)")
    parser.add_argument("--out", default=str(OUT_DIR), help="where the copies go (a folder per stack)")
    parser.add_argument("--sync-every", type=float, default=SYNC_EVERY_S, metavar="SECONDS",
                        help=f"copy new and grown event files this often while TensorBoard runs "
                             f"(default {SYNC_EVERY_S:g}; 0: once only)")


def sync(fs: Any, root: str, target: Path) -> list[str]:
    """Copy every file under `root` that `target` lacks or holds at another size; the copied
    paths, relative to root. A file is written under a temporary name and renamed, so a
    TensorBoard reading the folder never sees half a file. A key that would land outside
    `target` (`..`, absolute, a symbolic link on the way: local_copy.local_path) is not copied
    and is reported on stderr: the bucket is writable from the trainer's pod."""
    copied = []
    fs.invalidate_cache()
    root = root.rstrip("/")
    for path, info in sorted(fs.find(root, detail=True).items()):
        if info.get("type") == "directory":
            continue
        relative = path[len(root) + 1:] if path.startswith(root + "/") else path
        try:
            local = local_path(target, relative)
        except UnsafeKey as error:
            print(f"tensorboard: refused {path}: {error}", file=sys.stderr)
            continue
        except OSError as error:  # a name this file system cannot hold
            print(f"tensorboard: not copied {path}: {error}", file=sys.stderr)
            continue
        size = info.get("size")
        partial = local.with_name(f".{local.name}.partial")
        try:
            if local.exists() and size is not None and local.stat().st_size == size:
                continue
            local.parent.mkdir(parents=True, exist_ok=True)
            fs.get_file(path, str(partial))
            os.replace(partial, local)
        except OSError as error:  # a name too long, a file where a folder is due: this key only
            with contextlib.suppress(OSError):
                partial.unlink(missing_ok=True)
            print(f"tensorboard: not copied {path}: {error}", file=sys.stderr)
            continue
        except BaseException:  # Ctrl-C, SIGTERM (see serve): no leftovers
            partial.unlink(missing_ok=True)
            raise
        copied.append(relative)
    return copied


def sync_stack(outputs: Outputs, out: Path,
               opener: Callable[[str], tuple[Any, str]] | None = None) -> tuple[Path, list[str]]:
    if not outputs.checkpoint_uri:
        raise StackError("the stack has no checkpoint_uri output")
    uri = f"{outputs.telemetry_uri}/tensorboard"
    fs, root = (opener or (lambda u: open_bucket(u, outputs)))(uri)
    if not fs.exists(root):
        raise FileNotFoundError(f"{uri} does not exist yet (the trainer writes it at its first "
                                "log step)")
    target = out / file_name(outputs.stack)
    return target, sync(fs, root, target)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def serve(command: list[str], resync: Callable[[], list[str]], every: float) -> int:
    """Run `command` (TensorBoard) and call `resync` every `every` seconds until it exits;
    its exit status. A failed copy (network, credentials) is reported and retried next time:
    TensorBoard keeps serving what it has."""
    process = subprocess.Popen(command)
    stop = threading.Event()
    # SIGTERM (a closed terminal's session, `kill`, a supervisor) ends it as Ctrl-C does:
    # TensorBoard is stopped and the temporary files removed, not orphaned.
    previous = (signal.signal(signal.SIGTERM, _interrupt)
                if threading.current_thread() is threading.main_thread() else None)

    def loop() -> None:
        while not stop.wait(every):
            try:
                copied = resync()
            except Exception as error:  # noqa: BLE001 (any storage SDK's error)
                print(f"tensorboard: copy failed, retrying in {every:g} s: {error}", file=sys.stderr)
                continue
            if copied:
                print(f"{len(copied)} files copied", flush=True)

    worker = threading.Thread(target=loop, name="tensorboard-sync", daemon=True)
    if every > 0:
        worker.start()
    try:
        return wait_for_exit(process)
    except KeyboardInterrupt:
        process.terminate()
        process.wait()
        return 0
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if process.poll() is None:  # any other way out: never leave TensorBoard behind
            process.terminate()
            process.wait()
        stop.set()
        if worker.is_alive():
            worker.join(JOIN_S)
        if worker.is_alive():
            print("tensorboard: left a copy under way; the next run copies what it missed",
                  file=sys.stderr)


# The trainer's pin (trainer/requirements-cpu.txt, requirements-dev.txt): one viewer version.
TENSORBOARD_PIN = "tensorboard==2.21.0"


def run(args: argparse.Namespace) -> int:
    try:
        outputs = read_outputs(args.stack, args.outputs)
        target, copied = sync_stack(outputs, Path(args.out))
    except StackError as error:
        print(f"tensorboard: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # noqa: BLE001 (any storage SDK's error: credentials, network)
        print(f"tensorboard: cannot copy the event files: {error}", file=sys.stderr)
        return 2
    print(f"{len(copied)} files copied to {target}")
    if args.sync_only:
        return 0
    if importlib.util.find_spec("tensorboard") is None:
        # `make status` / `make doctor` install requirements-cli.txt, which leaves TensorBoard
        # out (its server and gRPC are most of a viewer's weight); the copy above is done.
        print(f"tensorboard: TensorBoard is not installed here; the event files are in {target}. "
              f"`{pip_install(TENSORBOARD_PIN)}` adds it (or view them with "
              "any TensorBoard: `tensorboard --logdir " + str(target) + "`)", file=sys.stderr)
        return 2
    command = [sys.executable, "-m", "tensorboard.main", "--logdir", str(target),
               "--port", str(args.port)]
    print(" ".join(command))
    return serve(command, lambda: sync_stack(outputs, Path(args.out))[1], args.sync_every)
