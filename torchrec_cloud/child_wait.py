"""Wait for a child process so that Ctrl-C and SIGTERM still reach this command.

The kernel gives a signal sent to the process to any thread that does not block it. Python
runs its handler in the main thread only, between two bytecodes, so a main thread blocked in
`Popen.wait()` (one waitpid call) sleeps through a Ctrl-C another thread received (a copy
thread, a library's) until the child ends: `tensorboard` went on serving, `logs --follow`
went on following. Waiting in short slices returns to the interpreter, which runs the handler.
"""

from __future__ import annotations

import subprocess

SLICE_S = 0.2  # how late a Ctrl-C may be handled at most


def wait_for_exit(process: subprocess.Popen) -> int:
    """`process.wait()`, interruptible by a signal whichever thread received it."""
    while True:
        try:
            return process.wait(timeout=SLICE_S)
        except subprocess.TimeoutExpired:
            continue
