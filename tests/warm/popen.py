"""`WarmPopen`: a `subprocess.Popen` whose `python -m trainer...` child is forked by the server.

Everything but starting and reaping the child is the standard library's: pipes, text mode,
`communicate` with timeouts, `send_signal`, `kill`. The child is the server's, not ours, so
its wait status comes over the connection that started it (`_internal_poll`, `_wait`).
"""

from __future__ import annotations

import os
import pickle
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parents[2]
SITE = Path(__file__).resolve().parent / "site"  # sitecustomize.py for processes a shell starts
SOCKET_ENV = "WARM_PYTHON_SOCKET"
# The entry points a trainer pod runs (workloads/command.py) and torchrun's ranks.
MODULES = frozenset({"trainer", "trainer.launch", "torch.distributed.run"})
# The signals that stop a process, whose disposition a child inherits when ignored and gets
# back at its default when handled (exec resets a handler); Python adds its SIGINT handler.
INHERITED_SIGNALS = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM)
_ORIGINAL_POPEN = subprocess.Popen
_socket_path: Optional[str] = None
_server: Optional[subprocess.Popen] = None
_ready = False


def pythonpath() -> str:
    return f"{REPO}{os.pathsep}{SITE}"


def environment() -> dict[str, str]:
    """What a process a shell starts (a gang pod's launcher) needs in its environment, beside
    the pod's own, for its torchrun ranks to come warm: PYTHONPATH with the repository."""
    found = {"PYTHONPATH": pythonpath()}
    if _socket_path is not None:
        found[SOCKET_ENV] = _socket_path
    return found


def _module_and_args(args: list[str], env: dict[str, str]) -> Optional[tuple[str, list[str], bool]]:
    """(module, its args, -u) when `args` is this interpreter's `python [-u] -m MODULE ...`."""
    if len(args) < 3:
        return None
    found = shutil.which(args[0], path=env.get("PATH")) if os.sep not in args[0] else args[0]
    if found is None or os.path.realpath(found) != os.path.realpath(sys.executable) \
            or os.path.dirname(os.path.abspath(found)) != os.path.dirname(sys.executable):
        return None
    rest, unbuffered = list(args[1:]), False
    if rest[0] == "-u":
        rest, unbuffered = rest[1:], True
    if len(rest) < 2 or rest[0] != "-m" or rest[1] not in MODULES:
        return None
    return rest[1], rest[2:], unbuffered


class WarmPopen(_ORIGINAL_POPEN):  # type: ignore[misc, valid-type]
    _warm: Optional[socket.socket] = None

    def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env,
                       startupinfo, creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite,
                       errread, errwrite, *rest: Any) -> None:
        conn = None
        if close_fds and not (shell or executable or preexec_fn or pass_fds
                              or isinstance(args, (str, bytes))):
            conn = _ask_server(list(map(os.fspath, args)), cwd,
                               dict(os.environ if env is None else env), rest,
                               (p2cread, c2pwrite, errwrite))
        if conn is None:
            return super()._execute_child(args, executable, preexec_fn, close_fds, pass_fds, cwd,
                                          env, startupinfo, creationflags, shell, p2cread,
                                          p2cwrite, c2pread, c2pwrite, errread, errwrite, *rest)
        self._warm, self._warm_buffer = conn, b""
        self.pid = int(self._warm_line(None))
        self._child_created = True
        self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)

    def _warm_line(self, timeout: Optional[float]) -> Optional[str]:
        """The server's next line, or None when none came within `timeout` seconds."""
        assert self._warm is not None
        end = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._warm_buffer:
            left = None if end is None else max(0.0, end - time.monotonic())
            if not select.select([self._warm], [], [], left)[0]:
                return None
            chunk = self._warm.recv(256)
            if not chunk:  # the server is gone: nothing will report this child's end
                return str(signal.SIGKILL)  # the status of a process killed by SIGKILL
            self._warm_buffer += chunk
        line, self._warm_buffer = self._warm_buffer.split(b"\n", 1)
        return line.decode()

    def _warm_status(self, timeout: Optional[float]) -> Optional[int]:
        if self.returncode is None:
            line = self._warm_line(timeout)
            if line is not None:
                self.returncode = os.waitstatus_to_exitcode(int(line))
                self._reaped()
        return self.returncode

    def _reaped(self) -> None:
        """Tell the server the status is read and wait until it has reaped the child (it
        closes then): after a wait, as after waitpid, the pid and its group are gone."""
        assert self._warm is not None
        try:
            self._warm.shutdown(socket.SHUT_WR)
            while self._warm.recv(256):
                pass
        except OSError:
            pass  # the server is gone: init reaps its children
        self._warm.close()

    def _internal_poll(self, _deadstate=None, **_ignored):  # type: ignore[override]
        if self._warm is None:
            return super()._internal_poll(_deadstate=_deadstate)
        return self._warm_status(0)

    def _wait(self, timeout):  # type: ignore[override]
        if self._warm is None:
            return super()._wait(timeout)
        if self._warm_status(timeout) is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode


def _ask_server(args: list[str], cwd: Any, env: dict[str, str], rest: tuple,
                fds: tuple[int, int, int]) -> Optional[socket.socket]:
    """A connection whose first line is the forked child's pid, or None: start it ordinarily."""
    # rest: restore_signals, gid, gids, uid, umask, start_new_session[, process_group]
    gid, gids, uid, umask, start_new_session = rest[1:6]
    if _socket_path is None or gid is not None or gids is not None or uid is not None \
            or umask != -1 or (len(rest) > 6 and rest[6] not in (None, -1)):
        return None
    found = _module_and_args(args, env)
    if found is None:
        return None
    module, module_args, unbuffered = found
    request = {"module": module, "args": module_args, "env": env, "unbuffered": unbuffered,
               "cwd": os.path.abspath(os.fspath(cwd) if cwd is not None else os.getcwd()),
               "start_new_session": bool(start_new_session), "parent": os.getpid(),
               "ignored": ignored_signals()}
    if not _wait_until_ready():
        return None
    std = [fd if fd != -1 else default for fd, default in zip(fds, (0, 1, 2))]
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(_socket_path)
        socket.send_fds(conn, [pickle.dumps(request)], std)
    except OSError:
        conn.close()
        return None
    reply = conn.recv(1, socket.MSG_PEEK)
    if not reply or reply == b"-":  # "-why": the server refused (another environment)
        conn.close()
        return None
    return conn


def ignored_signals() -> list[int]:
    """The stop signals this process ignores: an exec'd child inherits them ignored (`nohup`,
    a script's `cmd &`), and the forked child must too (server.py run_child)."""
    return [int(s) for s in INHERITED_SIGNALS if signal.getsignal(s) == signal.SIG_IGN]


def started_by(parent: int) -> list[tuple[int, str]]:
    """(pid, module) of every process the server forked at `parent`'s request."""
    from tests.warm.server import parse_record, started_folder

    if _socket_path is None:
        return []
    folder = Path(started_folder(_socket_path, parent))
    names = sorted(folder.iterdir()) if folder.is_dir() else []
    return [parse_record(name.name) for name in names]


def forked_module(pid: int) -> Optional[str]:
    """The module the server forked `pid` to run, or None: /proc shows the server's own
    command line for its children (they were never exec'd)."""
    from tests.warm.server import parse_record, started_root

    if _socket_path is None:
        return None
    found = list(Path(started_root(_socket_path)).glob(f"*/{pid}.*"))
    return parse_record(found[0].name)[1] if found else None


def _wait_until_ready() -> bool:
    """In the process that started the server: wait for its imports once (~5 s of CPU)."""
    global _ready
    if _server is None or _ready:
        return True
    assert _server.stdout is not None
    _ready = _server.stdout.readline() == b"ready\n"
    return _ready


def install(path: str) -> None:
    """From now on, eligible `subprocess.Popen`s in this process are forked by the server."""
    global _socket_path
    _socket_path = path
    subprocess.Popen = WarmPopen  # type: ignore[misc]
    handler = sys.modules.get(
        "torch.distributed.elastic.multiprocessing.subprocess_handler.subprocess_handler")
    if handler is not None:
        handler.Popen = WarmPopen  # type: ignore[attr-defined]


def start_server(directory: Path) -> str:
    """Start this process's server (imports run in the background) and route through it; ''
    where this system cannot (no pidfds)."""
    global _server
    try:  # the server waits for its children through pidfds (Linux 5.3+)
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return ""  # every process starts the ordinary way
    path = str(directory / "warm.sock")
    env = {**os.environ, SOCKET_ENV: path, "OMP_NUM_THREADS": "1", "PYTHONPATH": pythonpath()}
    _server = _ORIGINAL_POPEN([sys.executable, "-m", "tests.warm.server", path], cwd=REPO,
                              env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    os.environ[SOCKET_ENV] = path
    install(path)
    return path


def stop_server() -> None:
    """Close the server's stdin: it exits (children already forked run to their ends)."""
    global _server
    if _server is not None:
        assert _server.stdin is not None
        _server.stdin.close()
        _server.wait(timeout=30)
        _server = None
