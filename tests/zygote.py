"""A fork server for the tests' runs of ``zellij-swarm``: each run is still a process of its
own, started in the test's directory with the test's environment, arguments, umask and
standard streams, and its exit status is the one the test sees — but it is forked from an
interpreter that has already imported the command, instead of starting Python and importing
it anew. That import was most of the CPU of a reader (about 0.12 s of a `status`'s 0.16 s),
and the fast tier makes over a thousand such runs on a two-core machine.

What a fork cannot give as an exec would is refused, and the caller runs the command the
ordinary way instead (``Swarm.__call__``). A forked process's ``/proc/PID/environ`` and
``cmdline`` stay the server's, which starts with the tests' scrubbed environment (one with a
fake Zellij's socket directory was killed by that test's cleanup of the processes it finds
by it): a run with a run's markers in its environment is exec'd, and so is one whose
environment differs from the server's in what the interpreter reads only as it starts
(``PYTHON*``, the locale's variables). Set ``ZSW_TEST_EXEC=1`` to run every command the
ordinary way.

Run as a script: ``python tests/zygote.py SOCKET`` serves on the Unix socket ``SOCKET`` until
the process that started it is gone. Each connection is handled by a process forked for it,
which forks the command's process, sends its pid, waits for it and sends its exit status.
"""

from __future__ import annotations

import atexit
import locale
import os
import pickle
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zellij_swarm.worker import procs

STARTUP_KEYS = ("PYTHON", "LANG", "LC_")  # read by the interpreter as it starts, not later
# what the command finds a run's processes by (its owner: procs' markers): a run started
# inside a worker must be found as the worker's
MARKER_KEYS = frozenset(m.split(b"=", 1)[0].decode()
                        for m in (*procs.generation_markers("r", 1, 1), *procs.hold_markers("r")))
_FDS = 3  # the command's stdin, stdout and stderr


def startup_environment(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(STARTUP_KEYS) or k == "LANGUAGE"}


def send_message(conn: socket.socket, obj: Any, fds: list[int] | None = None) -> None:
    data = pickle.dumps(obj)
    header = struct.pack("!I", len(data))
    if fds:
        socket.send_fds(conn, [header], fds)
    else:
        conn.sendall(header)
    conn.sendall(data)


def receive_message(conn: socket.socket, with_fds: bool = False) -> tuple[Any, list[int]]:
    if with_fds:
        header, fds, _, _ = socket.recv_fds(conn, 4, _FDS)
    else:
        header, fds = conn.recv(4, socket.MSG_WAITALL), []
    if len(header) < 4:
        raise EOFError("the other end closed the connection")
    (size,) = struct.unpack("!I", header)
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise EOFError("the other end closed the connection")
        data += chunk
    return pickle.loads(data), list(fds)


def _exit_code(exc: SystemExit) -> int:
    """What the interpreter makes of an uncaught SystemExit."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def _run_command(request: dict[str, Any], fds: list[int]) -> None:
    """In the command's own process: become what ``python -m zellij_swarm ARGS`` would be."""
    import runpy

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.umask(request["umask"])
    time.tzset()
    sys.argv = ["-m", *request["args"]]
    sys.path[0] = request["cwd"]  # what -m puts first
    code = 0
    try:
        runpy.run_module("zellij_swarm", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = _exit_code(exc)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    # an interpreter's own end: its non-daemon threads, its exit handlers, its streams
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            code = code or 120
    os._exit(code)


def _handle(conn: socket.socket) -> None:
    request, fds = receive_message(conn, with_fds=True)
    pid = os.fork()
    if pid == 0:
        conn.close()
        _run_command(request, fds)
    for fd in fds:
        os.close(fd)
    send_message(conn, pid)
    _, status = os.waitpid(pid, 0)
    send_message(conn, os.waitstatus_to_exitcode(status))


def serve(path: str) -> None:
    import zellij_swarm.cli  # noqa: F401  (the import each command would pay)

    parent = os.getppid()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path + ".new")
    server.listen(64)
    os.rename(path + ".new", path)  # the client connects once the path is there
    server.settimeout(1.0)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the handlers' ends: reaped by the kernel
    while os.getppid() == parent:
        try:
            conn, _ = server.accept()
        except TimeoutError:
            continue
        if os.fork() == 0:
            server.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            try:
                _handle(conn)
            finally:
                os._exit(0)
        conn.close()


class ForkServer:
    """The client: one server per test process, started at its first use with ``base_env``
    (the tests' scrubbed environment) and ended with the process. ``run`` answers as
    ``subprocess.run(..., capture_output=True, text=True, errors="replace")`` would, or None
    where the command must be run the ordinary way."""

    def __init__(self, base_env: Callable[[], dict[str, str]]) -> None:
        self._base_env = base_env
        self._lock = threading.Lock()
        self._server: subprocess.Popen | None = None
        self._path = ""
        self._startup: dict[str, str] | None = None  # the server's, as it started

    def _start(self) -> None:
        directory = tempfile.mkdtemp(prefix="zsw-fork-server-")
        path = os.path.join(directory, "socket")
        env = self._base_env()
        self._startup = startup_environment(env)
        self._server = subprocess.Popen([sys.executable, __file__, path], env=env,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        atexit.register(self._stop, self._server, directory)
        deadline = time.monotonic() + 60
        while not os.path.exists(path):  # put there once it listens
            if self._server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the tests' fork server did not start (exit {self._server.poll()})")
            time.sleep(0.01)
        self._path = path

    @staticmethod
    def _stop(server: subprocess.Popen, directory: str) -> None:
        server.kill()
        server.wait()
        shutil.rmtree(directory, ignore_errors=True)

    def _connected(self) -> socket.socket:
        """A connection to the server, started (again, if it is gone) as needed."""
        with self._lock:
            for attempt in range(2):
                if self._server is None or self._server.poll() is not None or attempt:
                    if self._server is not None:
                        self._server.kill()
                    self._start()
                conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    conn.connect(self._path)
                    return conn
                except OSError:  # killed just now (a test's cleanup of processes it finds): once more
                    conn.close()
            raise RuntimeError("the tests' fork server does not take connections")

    def declines(self, env: dict[str, str]) -> bool:
        """A forked process's /proc/PID/environ is the server's, not ``env``: a run's markers
        must be in the one an exec gives; and what the interpreter reads as it starts must be
        the server's. (Other variables the tests find processes by, a Zellij's socket
        directory, are carried by what the command starts: those are exec'd with ``env``; the
        command's own process has ended when ``run`` returns, and it forks nothing that goes on
        without an exec.)"""
        return bool(os.environ.get("ZSW_TEST_EXEC")) or not MARKER_KEYS.isdisjoint(env) \
            or startup_environment(env) != (self._startup or startup_environment(self._base_env()))

    def run(self, args: tuple[str, ...], cwd: Path, env: dict[str, str], input: str | None,
            timeout: float) -> tuple[int, str, str] | None:
        if self.declines(env):
            return None
        conn = self._connected()
        with conn:
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            in_r, in_w = os.pipe() if input is not None else (os.dup(0), -1)
            try:
                send_message(conn, {"args": args, "cwd": str(cwd), "env": env, "umask": _umask()},
                             [in_r, out_w, err_w])
            except BaseException:  # no command: none of the pipes has a use
                for fd in (in_w, out_r, err_r):
                    if fd >= 0:
                        os.close(fd)
                raise
            finally:  # the command's ends are its own now
                for fd in (in_r, out_w, err_w):
                    os.close(fd)
            encoding = locale.getpreferredencoding(False)
            streams = [_Drain(out_r), _Drain(err_r)]
            if input is not None:
                _feed(in_w, input.encode(encoding, "replace"))
            pid, _ = receive_message(conn)
            deadline = time.monotonic() + timeout
            try:
                for stream in streams:  # as subprocess.run: the streams' ends, then the exit
                    stream.join(max(0.0, deadline - time.monotonic()))
                    if stream.is_alive():
                        raise TimeoutError
                conn.settimeout(max(0.01, deadline - time.monotonic()))
                code, _ = receive_message(conn)
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                conn.settimeout(None)
                receive_message(conn)
                raise subprocess.TimeoutExpired(["zellij-swarm", *args], timeout) from None
        out, err = (s.text(encoding) for s in streams)
        return code, out, err


def _umask() -> int:
    """This process's umask, read without setting it (``os.umask`` sets it, for a moment, for
    every thread)."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1], 8) for line in status if line.startswith("Umask:"))


class _Drain(threading.Thread):
    """Reads a pipe to its end."""

    def __init__(self, fd: int) -> None:
        super().__init__(daemon=True)
        self._fd = fd
        self._chunks: list[bytes] = []
        self.start()

    def run(self) -> None:
        with open(self._fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                self._chunks.append(chunk)

    def text(self, encoding: str) -> str:
        # as subprocess's text mode: universal newlines
        return b"".join(self._chunks).decode(encoding, "replace").replace("\r\n", "\n").replace("\r", "\n")


def _feed(fd: int, data: bytes) -> None:
    def write() -> None:
        with open(fd, "wb", buffering=0) as pipe:
            try:
                pipe.write(data)
            except BrokenPipeError:
                pass

    threading.Thread(target=write, daemon=True).start()


if __name__ == "__main__":
    serve(sys.argv[1])
