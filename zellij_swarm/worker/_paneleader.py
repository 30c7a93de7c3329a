"""The first process of a worker pane: it forwards a hang-up to the worker.

When a pane closes or its multiplexer dies, the kernel sends SIGHUP to the pane's session
leader only; every other process is left running on a dead terminal. A shell waiting for a
foreground command cannot pass the signal on, so the wrapper's first stage ``exec``s this
(same pid, still the session leader), which runs the wrapper's second stage as its child in
the same process group and, on SIGHUP (or SIGTERM), signals every descendant — also those
in sessions of their own, like the worker ``script`` runs on its own terminal: the worker
ends, the wrapper (which traps HUP) records its exit as 129, and the supervisor classifies
it (pane closed → ``cancelled``/``pane_closed``; session gone → ``lost``/``multiplexer_lost``).

Run as ``python -I -S _paneleader.py CMD…``: stdlib only, no site, started in a few ms.
"""

import os
import signal
import sys


def descendants(root: int) -> list[int]:
    """Every process below ``root``, from the parent links in /proc."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(name))
    out, stack = [], [root]
    while stack:
        for pid in children.get(stack.pop(), ()):
            out.append(pid)
            stack.append(pid)
    return out


def main(argv: list[str]) -> int:
    def forward(signum: int, _frame: object) -> None:
        signal.signal(signum, signal.SIG_IGN)
        for pid in descendants(os.getpid()):
            try:
                os.kill(pid, signum)
            except OSError:
                pass

    def ignore(_signum: int, _frame: object) -> None:
        """Ctrl-C and Ctrl-\\ reach the whole foreground group by themselves."""

    signal.signal(signal.SIGHUP, forward)
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, ignore)
    signal.signal(signal.SIGQUIT, ignore)
    child = os.fork()
    if child == 0:
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores these; a worker must not
            signal.signal(sig, signal.SIG_DFL)
        try:
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except ChildProcessError:
            return 0
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
