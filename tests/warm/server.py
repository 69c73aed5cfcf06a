"""The warm server: imports the trainer once, then forks one child per request.

Protocol (a Unix stream socket, one connection per child): the client sends one pickled
request with its child's stdin, stdout and stderr descriptors attached (SCM_RIGHTS); the
server forks and answers the child's pid as a line, then, when the child ends, its raw wait
status as a second line. The child stays a zombie until the client closes the connection
(it has read the status, or is gone), as a started child stays one until its parent waits:
until then its pid and process group exist, so a `killpg` the client sends to a child that has
just ended succeeds as it would (torchrun's agent closes its workers' groups so). The server is
single-threaded, so a fork never copies a lock another thread holds; it exits when its parent
closes its stdin.
"""

from __future__ import annotations

import io
import os
import pickle
import runpy
import selectors
import signal
import socket
import sys
import threading
from typing import Any

# What a trainer process imports before its first step (trainer/__main__.py, trainer/launch.py).
PRELOAD = ("torch", "torch.distributed.run", "torch.distributed.launcher.api", "trainer.launch",
           "trainer.train", "trainer.distributed", "trainer.fabric_gate", "trainer.telemetry",
           "trainer.data.prefetch", "trainer.__main__")


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 3)
    while True:  # a request larger than one read (a long environment)
        try:
            request = pickle.loads(data)
            return request, fds
        except (EOFError, pickle.UnpicklingError):
            more = conn.recv(1 << 20)
            if not more:
                raise
            data += more


def _text_stream(fd: int, unbuffered: bool, errors: str, line_buffering: bool) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding="utf-8", errors=errors,
                            line_buffering=line_buffering, write_through=unbuffered)


def _exit_status(code: Any) -> int:
    """What the interpreter does with SystemExit's argument."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


# Read after start-up, or set again in the child (run_child): they may differ from the server's.
SET_IN_THE_CHILD = frozenset({"PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE",
                              "PYTHONBREAKPOINT", "PYTHONSTARTUP"})


# torch reads these when it is imported (torch/__init__.py, torch/distributed/__init__.py).
READ_BY_TORCH_AT_IMPORT = frozenset({"TORCH_LOGS", "TORCH_DISTRIBUTED_DEBUG", "TORCH_CPP_LOG_LEVEL",
                                     "TORCH_SHOW_CPP_STACKTRACES"})


def _entries(pythonpath: str) -> list[str]:
    return [os.path.realpath(p) for p in pythonpath.split(os.pathsep) if p]


# The interpreter's own path (standard library, site-packages): sys.path without the server's
# working directory (first) and its PYTHONPATH entries. Set by serve().
BASE_PATH: list[str] = []


def refusal(request: dict[str, Any]) -> str:
    """Why the child would not be the process a fresh interpreter makes ('' if none): settings
    read when the interpreter or torch starts cannot change after the import, and the entry
    point must be importable from the child's own path (its working directory and PYTHONPATH)."""
    env, mine = request["env"], os.environ
    extra = set(_entries(env.get("PYTHONPATH", ""))) - set(_entries(mine.get("PYTHONPATH", "")))
    if extra:
        return f"PYTHONPATH has {sorted(extra)}"
    top = sys.modules[request["module"].split(".")[0]]
    home = os.path.realpath(os.path.dirname(os.path.dirname(top.__file__ or "")))
    if home not in {os.path.realpath(request["cwd"]), *_entries(env.get("PYTHONPATH", "")),
                    *BASE_PATH}:
        return f"{request['module']} is not importable from {request['cwd']} and its PYTHONPATH"
    for key in sorted(set(env) | set(mine)):
        startup = key.startswith(("PYTHON", "LD_", "OMP_", "MKL_")) or key in READ_BY_TORCH_AT_IMPORT
        if startup and key not in SET_IN_THE_CHILD and env.get(key) != mine.get(key):
            return f"{key}={env.get(key)!r}"
    return ""


def _take_signals_as_exec_would(ignored: list[int]) -> None:
    """The stop signals as `python -m` started by the requester has them: ignored where the
    requester ignores them (exec keeps SIG_IGN), else at their default (exec resets a handler,
    the server's own SIGINT SIG_IGN included), and SIGINT raising KeyboardInterrupt as the
    interpreter sets it at start where it was not ignored."""
    from tests.warm.popen import INHERITED_SIGNALS

    for signum in INHERITED_SIGNALS:
        if signum in ignored:
            signal.signal(signum, signal.SIG_IGN)
        elif signum == signal.SIGINT:
            signal.signal(signum, signal.default_int_handler)
        else:
            signal.signal(signum, signal.SIG_DFL)


def run_child(request: dict[str, Any], fds: list[int], keep_closed: list[int]) -> None:
    """In the forked child: become the process `python -m MODULE ARGS` would be, run it, exit."""
    for fd in keep_closed:
        os.close(fd)
    _take_signals_as_exec_would(request["ignored"])
    if request["start_new_session"]:
        os.setsid()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    unbuffered = request["unbuffered"] or bool(os.environ.get("PYTHONUNBUFFERED"))
    sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = _text_stream(1, unbuffered, "strict", line_buffering=False)
    sys.stderr = _text_stream(2, unbuffered, "backslashreplace", line_buffering=True)
    # `python -m`'s path: the working directory, PYTHONPATH, then the interpreter's own.
    sys.path[:] = [request["cwd"], *_entries(os.environ.get("PYTHONPATH", "")), *BASE_PATH]
    sys.argv = [request["module"], *request["args"]]
    # Run as __main__ from its code, as `python -m` does; the preloaded copy stays imported
    # (runpy warns of it in sys.modules otherwise, a line a fresh process does not print).
    for name in (request["module"], f"{request['module']}.__main__"):
        sys.modules.pop(name, None)
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        status = 0
    except SystemExit as stop:
        status = _exit_status(stop.code)
    except KeyboardInterrupt:  # the interpreter ends itself by SIGINT then (status -2)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        status = 1
    except BaseException:  # noqa: BLE001 - the interpreter reports any uncaught exception
        sys.excepthook(*sys.exc_info())
        status = 1
    threading._shutdown()  # type: ignore[attr-defined]  # as at interpreter exit
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)


def serve(path: str) -> None:
    own = set(_entries(os.environ.get("PYTHONPATH", "")))
    BASE_PATH[:] = [p for p in sys.path[1:] if p and os.path.realpath(p) not in own]
    for module in PRELOAD:
        __import__(module)
    from tests.warm.popen import install

    install(path)  # torchrun's agent in a child forks its ranks here too
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(sys.stdin, selectors.EVENT_READ, "parent")
    children: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, connection)
    zombies: dict[int, tuple[int, socket.socket]] = {}  # ended, status sent: pidfd -> (pid, conn)
    print("ready", flush=True)
    while True:
        for key, _ in selector.select():
            if key.data == "parent":
                if not sys.stdin.buffer.read1(1):
                    return  # the pytest process is gone: leave the children to their ends
            elif key.data == "accept":
                conn, _ = listener.accept()
                try:
                    request, fds = _receive(conn)
                except (OSError, EOFError, pickle.UnpicklingError):
                    conn.close()
                    continue
                why = refusal(request)
                if why:
                    _send(conn, f"-{why}\n")
                    conn.close()
                    for fd in fds:
                        os.close(fd)
                    if os.environ.get("WARM_PYTHON_DEBUG"):
                        print(f"warm: refused {request['module']}: {why}", file=sys.stderr)
                    continue
                open_fds = [listener.fileno(), conn.fileno(), sys.stdin.fileno(),
                            *(c.fileno() for _, c in [*children.values(), *zombies.values()]),
                            *children, *zombies]
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    run_child(request, fds, open_fds)
                for fd in fds:
                    os.close(fd)
                _record(path, request, pid)
                pidfd = os.pidfd_open(pid)
                children[pidfd] = (pid, conn)
                selector.register(pidfd, selectors.EVENT_READ, "child")
                _send(conn, f"{pid}\n")
            elif key.data == "child":  # ended: its status, still unreaped
                pidfd = key.fd
                pid, conn = children.pop(pidfd)
                selector.unregister(pidfd)
                _send(conn, f"{_status_unreaped(pidfd)}\n")
                zombies[pidfd] = (pid, conn)
                selector.register(conn, selectors.EVENT_READ, pidfd)
            else:  # the client closed the connection: reap, as its wait would have
                pidfd = key.data
                pid, conn = zombies.pop(pidfd)
                selector.unregister(conn)
                os.waitpid(pid, 0)
                os.close(pidfd)
                conn.close()  # last: the client's wait returns on it, the child reaped by then


def _status_unreaped(pidfd: int) -> int:
    """The ended child's raw wait status (as waitpid gives it), leaving it a zombie."""
    found = os.waitid(os.P_PIDFD, pidfd, os.WEXITED | os.WNOWAIT)
    if found.si_code == os.CLD_EXITED:
        return (found.si_status & 0xFF) << 8
    return found.si_status | (0x80 if found.si_code == os.CLD_DUMPED else 0)


def started_folder(path: str, parent: int) -> str:
    """Where the server notes the processes it forked at `parent`'s request, one empty file
    `<pid>.<module>` each: /proc names the server as their parent and its command line as
    theirs (no exec), so a test that looks for a launcher's workers asks here too."""
    return os.path.join(started_root(path), str(parent))


def started_root(path: str) -> str:
    return os.path.join(os.path.dirname(path), "started")


def parse_record(name: str) -> tuple[int, str]:
    """(pid, module) from a record's file name, `<pid>.<module>` (_record writes it)."""
    pid, module = name.split(".", 1)
    return int(pid), module


def _record(path: str, request: dict[str, Any], pid: int) -> None:
    folder = started_folder(path, request["parent"])
    os.makedirs(folder, exist_ok=True)
    open(os.path.join(folder, f"{pid}.{request['module']}"), "w").close()


def _send(conn: socket.socket, line: str) -> None:
    try:
        conn.sendall(line.encode())
    except OSError:
        pass  # the client went away (a killed launcher): its child still gets reaped


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in pytest must not kill the server first
    serve(sys.argv[1])
