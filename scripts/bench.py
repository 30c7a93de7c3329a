"""The body of scripts/bench: measures every row of the performance table (issue 13) and prints
it as *now / goal* with ✓ or ✗.

Each round runs, in an order rotated from round to round: N trivial tasks at -j J through
zellij-swarm (headless), bare xargs, xargs running the same wrapper, and GNU parallel (these
four one after another, which of them first turning too); 1,000 and 10,000 trivial tasks
through zellij-swarm (snapshot cost, peak RSS); 100 × `sleep 1` at -j 100 (first batch's
launch span); 200 × `sleep 0.2` at -j 8 (refill latency); and 32 live tmux panes. Every
figure is the median over the rounds; a wall ratio is the median of each round's own ratio
(the runs it compares are seconds apart, so load that comes and goes shifts both). `--big`
then adds one 100,000-task run, `status` on it, and `resume` of a second one killed at 50 %.

CPU and memory of "our processes" are the supervisor's own figures (summary.json "usage":
supervisor, launcher, any helper; workers excluded) when it reports them — each process's own
rusage, which other work on the machine inflates little; otherwise the old estimates,
labelled as such. A load average above BUSY_LOAD per core before, during or after the runs
gets a warning line under the table. Every timed run gets a fresh directory; directories are
removed only after all runs, because deleting a large tree just before a run slows that
run's file I/O 2–3× here.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zellij_swarm.records import generation_files
from zellij_swarm.worker import wrapper

ROOT = Path(__file__).resolve().parent.parent
ZSW = [str(ROOT / ".venv/bin/zellij-swarm")]
KIB, MIB = 1024, 1024 * 1024


# ---------------------------------------------------------------------------------------------
# running things


@dataclass
class Proc:
    wall: float  # seconds
    maxrss_mb: float  # ru_maxrss of the top process and its reaped descendants (a max, not a sum)
    cpu: float  # user+sys seconds of the top process and its reaped descendants
    code: int


def timed(argv: list[str], *, cwd: Path, stdin_path: Path | None = None, env: dict[str, str] | None = None,
          check: bool = True) -> Proc:
    """Run ``argv`` to its end; wall time from wait4, resource usage of its whole reaped tree."""
    with open(stdin_path, "rb") if stdin_path else contextlib.nullcontext(subprocess.DEVNULL) as stdin, \
            tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, cwd=cwd, stdin=stdin, stdout=subprocess.DEVNULL, stderr=err, env=env)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        if check and p.returncode != 0:
            err.seek(0)
            sys.exit(f"bench: {shlex.join(argv[:3])} … failed ({p.returncode}): {err.read().decode()[-500:]}")
    return Proc(wall, usage.ru_maxrss / KIB, usage.ru_utime + usage.ru_stime, p.returncode)


def du(path: Path) -> int:
    """Bytes the tree under ``path`` takes on disk (allocated blocks, as `du -s`)."""
    out = subprocess.run(["du", "-s", "--block-size=1", str(path)], check=True, capture_output=True, text=True)
    return int(out.stdout.split()[0])


def only_run(state: Path) -> Path:
    return next((state / "runs").iterdir())


@dataclass
class ZswRun:
    proc: Proc
    state: Path  # the state dir
    run: Path  # the run's directory under it
    summary: dict[str, Any]

    @property
    def metrics(self) -> dict[str, Any]:
        m: dict[str, Any] = self.summary["metrics"]
        return m

    @property
    def usage(self) -> dict[str, Any] | None:
        """summary.json's "usage": CPU and peak RSS of our own processes (not the workers), when
        the supervisor reports it."""
        u = self.summary.get("usage")
        return u if isinstance(u, dict) else None


def zsw_run(d: Path, commands: Path, jobs: int, *extra: str) -> ZswRun:
    """One headless `zellij-swarm run` of ``commands`` in the fresh directory ``d``."""
    d.mkdir(parents=True)
    proc = timed([*ZSW, "run", "-j", str(jobs), "--backend", "headless", "--output", "quiet",
                  "--state-dir", str(d / "s"), *extra, str(commands)], cwd=d)
    run = only_run(d / "s")
    return ZswRun(proc, d / "s", run, json.loads((run / "summary.json").read_text()))


def make_wrappers(base: Path, n: int) -> Path:
    """N generation directories as a run's wrappers find them, the run's one wrapper
    (`wrapper.run_script`), and a listing with one command line per task: the arguments of
    `/bin/sh` for that task — `-c '. worker.sh' sh`, an empty mode and the generation's
    arguments (`headless`, as a headless run's), as the launcher runs it — written as sh
    words (`shlex.join`; GNU xargs reads that quoting, and `''` stays an empty argument). The
    caller runs it with `xargs -P J -L 1 /bin/sh` (`xargs_wrappers`), so a line holds the
    wrapper and its arguments without an exec of its own.

    Each directory is a shell (`records.shells`): `artifacts/` and the wrapper's files there,
    empty, so that its wrapper makes one file, its claim — as nearly every generation of a run
    finds it. Fresh directories made the wrapper create five files a task, whose cost here
    grows with the inodes the runs before freed (2,000 such wrappers took from 1.0× to 2.3×
    the time of shells over four rounds): a reference slower than the wrapper as a run runs
    it, which flattered the ratio against it."""
    listing = base / "wrappers.txt"
    script = base / "worker.sh"
    script.write_text(wrapper.run_script("bench"))
    lines = []
    for i in range(1, n + 1):
        gen = generation_files.GenPaths(base / f"slot-1/gen-{i}", 1, i)
        gen.dir.mkdir(parents=True)
        gen.artifacts.mkdir()
        for name in generation_files.SHELL_FILES:
            (gen.dir / name).touch()
        who = wrapper.WorkerIdentity("bench", f"task-{i}", f"t{i}", 1, i, 1)
        args = wrapper.arguments(gen, who, cmd="true", argv=None, cwd=str(base), env={}, headless=True)
        lines.append(shlex.join(wrapper.headless_argv(script, args)[1:]))
    listing.write_text("\n".join(lines) + "\n")
    return listing


def xargs_wrappers(listing: Path, jobs: int, cwd: Path) -> Proc:
    # -L 1: each line of the listing is one command line, split into words (sh-style quotes
    # honoured) and appended to /bin/sh — one exec per task, like the launcher's. Not
    # `-d '\n' sh -c`, which would add an `sh -c` of its own to every task.
    return timed(["xargs", "-P", str(jobs), "-L", "1", "/bin/sh"], stdin_path=listing, cwd=cwd)


def xargs_start_span(d: Path, n: int) -> float:
    """ms from the first to the last start of ``n`` × `sh -c ': > mark; sleep 1'` under
    `xargs -P n`: what starting a batch of shells at once costs this machine, with nothing of
    ours in it (a start is marked by its file's mtime, as a wrapper's claim marks ours)."""
    d.mkdir(parents=True)
    numbers = d / "numbers.txt"
    numbers.write_text("".join(f"{i}\n" for i in range(1, n + 1)))
    timed(["xargs", "-P", str(n), "-I{}", "sh", "-c", ": > mark-{}; sleep 1"], stdin_path=numbers, cwd=d)
    marks = sorted(p.stat().st_mtime_ns for p in d.glob("mark-*"))
    return (marks[-1] - marks[0]) / 1e6


def tmux_first_batch(d: Path) -> tuple[float, float] | None:
    """32 live panes on a private tmux server: (ms from the batch's start to its 32nd pane
    opened, ms to its 32nd worker started), or None when not all 32 opened."""
    (d / "tmp").mkdir(parents=True)
    (d / "sleep.txt").write_text("sleep 1\n" * 32)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TMUX", "ZELLIJ"))}
    env["TMUX_TMPDIR"] = str(d / "tmp")
    try:
        subprocess.run([*ZSW, "run", "-j", "32", "--max-visible-panes", "32", "--backend", "tmux", "--ui", "live",
                        "--require-multiplexer", "--output", "quiet", "--state-dir", str(d / "s"),
                        str(d / "sleep.txt")], cwd=d, env=env, check=True, capture_output=True, timeout=120)
    finally:
        subprocess.run(["tmux", "kill-server"], env=env, capture_output=True)
    run = only_run(d / "s")
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    start = next(e["ts"] for e in events if e["event"] == "batch_dispatch_started")
    opened = [e["ts"] for e in events if e["event"] == "pane_opened"]
    metrics = json.loads((run / "summary.json").read_text())["metrics"]
    if len(opened) != 32:
        return None
    return (max(opened) - start) * 1000, metrics["first_batch_launch_span_ms"]


def headless_refill_p95(run: Path) -> float:
    """ms from a headless slot's worker ending to that slot's next reservation, p95 — the
    slots past the visible cap (slot 1 has the one pane)."""
    ended: dict[tuple[int, int], float] = {}
    reserved: dict[tuple[int, int], float] = {}
    for line in (run / "events.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e["event"] in ("worker_completed", "worker_failed"):
            ended[(e["slot"], e["gen"])] = e["ts"]
        elif e["event"] == "slot_reserved":
            reserved[(e["slot"], e["gen"])] = e["ts"]
    gaps = sorted((t - ended[(slot, gen - 1)]) * 1000 for (slot, gen), t in reserved.items()
                  if slot > 1 and (slot, gen - 1) in ended)
    return gaps[min(len(gaps) - 1, int(len(gaps) * 0.95))]


def stuck_zellij_refill(work: Path) -> tuple[float, float]:
    """Headless refill p95 (ms) of 200 short tasks at -j 8 under the fake zellij, one pane
    shown: (no fault, every retitle hanging for its 10 s timeout). The backend's calls run on
    their own thread, so the second should be no worse than the first."""
    out = []
    for fault in ("", "hang:rename-pane"):
        d = work / f"stuck-{fault or 'none'}"
        (d / "sock").mkdir(parents=True)
        (d / "tasks.txt").write_text("sleep 0.05\n" * 200)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TMUX", "ZELLIJ", "FAKE_ZELLIJ"))}
        env.update(PATH=f"{ROOT / 'scripts/fake-zellij'}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}",
                   ZELLIJ_SOCKET_DIR=str(d / "sock"), HOME=str(d), XDG_RUNTIME_DIR=str(d / "run"),
                   FAKE_ZELLIJ_PYTHON=sys.executable, FAKE_ZELLIJ_VERSION="0.45.0", FAKE_ZELLIJ_FAULTS=fault,
                   ZELLIJ_SWARM_ZELLIJ_CALL_TIMEOUT_MS="10000", SHELL="/bin/sh", CI="true")
        try:
            subprocess.run([*ZSW, "run", "-j", "8", "--max-visible-panes", "1", "--backend", "zellij", "--ui", "live",
                            "--output", "quiet", "--state-dir", str(d / "s"), str(d / "tasks.txt")],
                           cwd=d, env=env, check=True, capture_output=True, timeout=180)
        finally:
            subprocess.run(["zellij", "kill-all-sessions", "--yes"], env=env, capture_output=True, timeout=30)
        out.append(headless_refill_p95(only_run(d / "s")))
    return out[0], out[1]


class EventTail:
    """Reads a growing events.jsonl incrementally (the supervisor flushes it in batches)."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.partial = path, 0, b""

    def new(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        *lines, self.partial = (self.partial + data).split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]


def kill_at_half(d: Path, commands: Path, n: int, jobs: int, deadline_s: float) -> tuple[Path, str | None]:
    """Start a run of ``commands`` and SIGKILL its supervisor — only it: the launcher and the
    workers are in sessions of their own and outlive it (spec §5.7) — once half of its tasks
    have ended. (run directory, None) or (_, why it could not be done)."""
    d.mkdir(parents=True)
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen([*ZSW, "run", "-j", str(jobs), "--backend", "headless", "--output", "quiet",
                              "--state-dir", str(d / "s"), str(commands)],
                             cwd=d, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + deadline_s
        while not (d / "s/runs").is_dir() or not any((d / "s/runs").iterdir()):
            if p.poll() is not None or time.monotonic() > deadline:
                p.kill()
                p.wait()
                return d, "the run never started"
            time.sleep(0.05)
        run = only_run(d / "s")
        tail, ended = EventTail(run / "events.jsonl"), 0
        while ended < n / 2:
            if p.poll() is not None:
                return run, "the run ended before half its tasks were seen done"
            if time.monotonic() > deadline:
                p.kill()
                p.wait()
                return run, f"half the tasks not done within {deadline_s:.0f} s"
            ended += sum(e["event"] in ("worker_completed", "worker_failed") for e in tail.new())
            time.sleep(0.05)
        with contextlib.suppress(FileNotFoundError, ValueError):
            lock_pid = int((run / "lock").read_text().split()[0])
            if lock_pid != p.pid:
                print(f"bench: the lock names pid {lock_pid}, not the run's pid {p.pid}", file=sys.stderr)
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
    return run, None


# ---------------------------------------------------------------------------------------------
# the table


@dataclass
class Row:
    label: str
    now: str
    goal: str = ""  # "" for an informational row
    ok: bool | None = None
    note: str = ""  # where the figure comes from, and related figures


def first_dispatch_after(events: Path, started: float) -> float | None:
    """Seconds from ``started`` to the first generation a resumed supervisor reserved: its
    first ``slot_reserved`` after its ``run_resumed`` (the records are all read back, the
    queue rebuilt and a task handed out again)."""
    resumed = False
    with open(events, "rb") as f:
        for line in f:
            if b'"run_resumed"' in line or (resumed and b'"slot_reserved"' in line):
                e = json.loads(line)
                if e["ts"] < started:
                    continue
                if e["event"] == "slot_reserved" and resumed:
                    return float(e["ts"]) - started
                resumed = resumed or e["event"] == "run_resumed"
    return None


def med(values: list[float]) -> float:
    return statistics.median(values)


def check(label: str, values: list[float], limit: float, fmt: Callable[[float], str], goal: str,
          *, strict: bool = False, note: str = "") -> Row:
    """A goal row: the median of ``values`` against ``limit`` (≤, or < when strict)."""
    if not values:
        return Row(label, "not measured", goal, False)
    v = med(values)
    return Row(label, fmt(v), goal, v < limit if strict else v <= limit, note)


def skipped(label: str, goal: str, why: str) -> Row:
    return Row(label, f"skipped ({why})", goal, None)


def spread(values: list[float], unit: str) -> str:
    """The rounds' lowest and highest, beside their median."""
    return f"rounds {min(values):.3f}–{max(values):.3f}{unit}" if len(values) > 1 else ""


def ms(v: float) -> str:
    return f"{v:.1f} ms"


def ratio(v: float) -> str:
    return f"{v:.2f}×"


def snapshot_cost(runs: list[ZswRun]) -> str:
    """summary metrics snapshot_write_ms (p50/max) and state_json_bytes, medians over runs."""
    p50, mx, size = [], [], []
    for r in runs:
        w = r.metrics.get("snapshot_write_ms")
        if isinstance(w, dict):
            if isinstance(w.get("p50"), int | float):
                p50.append(float(w["p50"]))
            if isinstance(w.get("max"), int | float):
                mx.append(float(w["max"]))
        elif isinstance(w, int | float):
            p50.append(float(w))
        b = r.metrics.get("state_json_bytes")
        if isinstance(b, int | float):
            size.append(float(b))
    write = (f"p50 {med(p50):.2f} ms" if p50 else "p50 n/a") + (f", max {med(mx):.2f} ms" if mx else ", max n/a")
    return f"write {write}; state.json {med(size) / KIB:,.1f} KB" if size else f"write {write}; state.json n/a"


def rss_figure(runs: list[ZswRun]) -> tuple[list[float], str]:
    """Peak RSS (MiB) summed over our processes from the summaries' "usage", else ru_maxrss
    of the top process (which covers its reaped children, as a max, not a sum)."""
    if runs and all(r.usage and "peak_rss_mb" in r.usage for r in runs):
        values = [float(r.usage["peak_rss_mb"]) for r in runs if r.usage]
        last = runs[-1].usage or {}
        parts = ", ".join(f"{k} {v.get('peak_rss_mb', 0):.1f}" for k, v in (last.get("processes") or {}).items()
                          if isinstance(v, dict))
        return values, "summary usage" + (f": {parts}" if parts else "")
    return [r.proc.maxrss_mb for r in runs], "estimate: ru_maxrss of the top process; no usage in summary"


def print_table(rows: list[Row]) -> None:
    def mark(r: Row) -> str:
        if r.ok is not None:
            return "✓" if r.ok else "✗"
        return "–" if r.goal else ""  # a goal row skipped; an informational row
    cells = [(r.label, f"{r.now} / {r.goal}" if r.goal else r.now, mark(r), r.note) for r in rows]
    w0 = max(len(c[0]) for c in cells)
    w1 = max(len(c[1]) for c in cells)
    print(f"| {'measure':<{w0}} | {'now / goal':<{w1}} |    | note")
    print(f"|{'-' * (w0 + 2)}|{'-' * (w1 + 2)}|----|------")
    for label, now, sign, note in cells:
        print(f"| {label:<{w0}} | {now:<{w1}} | {sign:<2} | {note}".rstrip())


# The first rows' task as a program rather than a builtin (informational)
PROGRAM = "/bin/true"
PROGRAM_ZSW, PROGRAM_XARGS = "zellij-swarm program", "xargs program"  # (names of directories too)
BUSY_LOAD = 0.5  # load average per core above which other work skews the wall ratios


def load_warning(when: str, load1: float | None = None) -> str | None:
    """One line when the machine is busy ``when`` (the 1-minute load average, now unless
    given — the highest seen after a round —, above ``BUSY_LOAD`` per core): wall ratios then
    mean less than the CPU rows, which come from the processes' own rusage and grow little
    with load."""
    if load1 is None:
        load1 = os.getloadavg()[0]
    cores = os.cpu_count() or 1
    if load1 <= BUSY_LOAD * cores:
        return None
    peak = "up to " if when == "during the runs" else ""
    return (f"bench: warning: load average {peak}{load1:.2f} on {cores} cores {when}: other work is running; "
            f"trust the CPU rows over the wall ratios, or run again on a quiet machine")


def header(args: argparse.Namespace) -> str:
    def git(*a: str) -> str:
        r = subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True, text=True)
        return r.stdout.strip()
    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = " (with uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else ""
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    mode = "quick" if args.quick else f"{args.rounds} rounds, medians"
    return (f"zellij-swarm bench · {datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z} · HEAD {head}{dirty} · "
            f"{os.cpu_count()} cores · load {load} · {mode}"
            + (f" · --big ({args.big_tasks:,} tasks)" if args.big else ""))


# ---------------------------------------------------------------------------------------------


def slurm_rows(work: Path, rounds: int, n: int, j: int) -> list[Row]:
    """``--executor slurm``: the Slurm executor's cost per task against the local one, with
    and without one allocation for the swarm, and what a bare ``srun`` costs (``xargs -P``
    starting ``srun -n1 true``). Per-task time at -j J is wall × J / N. Needs a cluster
    (``SLURM_CONF``; ``scripts/slurm-local start`` brings one up)."""
    if subprocess.run(["sinfo", "--noheader"], capture_output=True, timeout=30).returncode != 0:
        sys.exit("bench: --executor slurm: no Slurm cluster answers (eval \"$(scripts/slurm-local start)\" "
                 "exports the SLURM_CONF that names it)")
    line = work / "true.txt"
    line.write_text("true\n" * n)
    walls: dict[str, list[float]] = {k: [] for k in ("local", "slurm", "slurm --slurm-alloc", "xargs srun")}
    for r in range(rounds):
        walls["local"].append(zsw_run(work / f"local-{r}", line, j).proc.wall)
        walls["slurm"].append(zsw_run(work / f"slurm-{r}", line, j, "--executor", "slurm").proc.wall)
        walls["slurm --slurm-alloc"].append(
            zsw_run(work / f"alloc-{r}", line, j, "--executor", "slurm", "--slurm-alloc").proc.wall)
        numbers = work / "numbers.txt"
        numbers.write_text("".join(f"{i}\n" for i in range(n)))
        (work / f"srun-{r}").mkdir()
        walls["xargs srun"].append(timed(["xargs", "-P", str(j), "-n", "1", "srun", "--ntasks=1", "--quiet", "true"],
                                         stdin_path=numbers, cwd=work / f"srun-{r}").wall)
        print(f"slurm round {r + 1}/{rounds}: " + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in walls.items()),
              file=sys.stderr)
    per = {k: med(v) * j / n * 1000 for k, v in walls.items()}
    rows = [Row(f"{n:,} × `true` at -j {j}: wall, local executor", f"{med(walls['local']):.2f} s",
                note=f"{per['local']:.1f} ms per task")]
    for k in ("slurm", "slurm --slurm-alloc"):
        rows.append(Row(f"same, --executor {k}", f"{med(walls[k]):.2f} s",
                        note=f"{per[k]:.1f} ms per task, {per[k] - per['local']:+.1f} ms over local, "
                             f"{med(walls[k]) / med(walls['local']):.1f}× its wall"))
    rows.append(Row(f"bare `srun -n1 true` × {n:,} through `xargs -P {j}`", f"{med(walls['xargs srun']):.2f} s",
                    note=f"{per['xargs srun']:.1f} ms per task: Slurm's own cost"))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds; figures are their medians")
    ap.add_argument("--tasks", type=int, default=2000, help="trivial tasks of the runs against xargs")
    ap.add_argument("--jobs", type=int, default=32)
    ap.add_argument("--big", action="store_true", help="also the 100,000-task run, status on it and resume at 50 %%")
    ap.add_argument("--quick", action="store_true", help="1 round; skip the 10,000-task, tmux and zellij rows")
    ap.add_argument("--big-tasks", type=int, default=100_000, help=argparse.SUPPRESS)  # to try the --big path
    ap.add_argument("--executor", choices=("local", "slurm"), default="local",
                    help="slurm: only the Slurm executor's cost per task against local (a cluster must answer: "
                         "scripts/slurm-local start); --tasks defaults to 200 and --jobs to 16 there")
    args = ap.parse_args()
    if args.executor == "slurm":
        work = Path(tempfile.mkdtemp(prefix="zsw-bench-slurm-"))
        try:
            print(header(args), file=sys.stderr)
            n = args.tasks if args.tasks != 2000 else 200
            j = args.jobs if args.jobs != 32 else 16
            print_table(slurm_rows(work, 1 if args.quick else args.rounds, n, j))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    if args.quick:
        args.rounds = 1
    n, j, big_n = args.tasks, args.jobs, args.big_tasks
    have_tmux = bool(shutil.which("tmux")) and not args.quick
    title = header(args)
    print(title, file=sys.stderr)
    busy_before = load_warning("before the runs")

    work = Path(tempfile.mkdtemp(prefix="zsw-bench-"))
    try:
        def commands(count: int, line: str = "true") -> Path:
            path = work / f"{re.sub('[^A-Za-z0-9.]', '-', line)}-{count}.txt"
            if not path.exists():
                path.write_text(f"{line}\n" * count)
            return path

        numbers = work / "numbers.txt"
        numbers.write_text("".join(f"{i}\n" for i in range(n)))

        # (a program, not a builtin: "… /bin/true", the same pair where the command is exec'd)
        walls: dict[str, list[float]] = {k: [] for k in ("zellij-swarm", "xargs", "xargs+wrapper", "parallel",
                                                         PROGRAM_ZSW, PROGRAM_XARGS)}
        cpu: dict[str, list[float]] = {k: [] for k in walls}
        zsw_n: list[ZswRun] = []
        zsw_1k: list[ZswRun] = []
        zsw_10k: list[ZswRun] = []
        disk_per_task: list[float] = []
        spans100: list[float] = []
        xargs_spans100: list[float] = []
        refill_p95: list[float] = []  # on the supervisor's monotonic clock (``refill_seen_ms``)
        refill_file_p95: list[float] = []  # from the generations' file times (``refill_latency_ms``)
        tmux_open: list[float] = []
        tmux_started: list[float] = []
        tmux_failed = 0

        def measured(name: str, proc: Proc) -> None:
            walls[name].append(proc.wall)
            cpu[name].append(proc.cpu)

        def bare_xargs(d: Path, line: str) -> Proc:
            d.mkdir()
            return timed(["xargs", "-P", str(j), "-n", "1", "sh", "-c", line], stdin_path=numbers, cwd=d)

        def run_zsw(d: Path) -> None:
            r = zsw_run(d, commands(n), j)
            zsw_n.append(r)
            measured("zellij-swarm", r.proc)
            disk_per_task.append(du(r.state) / n)

        def run_xargs_wrapper(d: Path) -> None:
            d.mkdir()
            measured("xargs+wrapper", xargs_wrappers(make_wrappers(d, n), j, d))

        def run_parallel(d: Path) -> None:
            d.mkdir()
            measured("parallel", timed(["parallel", "-j", str(j)], stdin_path=commands(n), cwd=d))

        def run_1k(d: Path) -> None:
            zsw_1k.append(zsw_run(d, commands(1000), j))

        def run_10k(d: Path) -> None:
            zsw_10k.append(zsw_run(d, commands(10_000), j))

        def run_sleep100(d: Path) -> None:
            spans100.append(zsw_run(d, commands(100, "sleep 1"), 100).metrics["first_batch_launch_span_ms"])

        def run_xargs_sleep100(d: Path) -> None:
            xargs_spans100.append(xargs_start_span(d, 100))

        def run_refill(d: Path) -> None:
            metrics = zsw_run(d, commands(200, "sleep 0.2"), 8).metrics
            refill_p95.append(metrics["refill_seen_ms"]["p95"])
            refill_file_p95.append(metrics["refill_latency_ms"]["p95"])

        def run_tmux(d: Path) -> None:
            nonlocal tmux_failed
            try:
                got = tmux_first_batch(d)
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
                print(f"bench: the tmux run failed: {e}", file=sys.stderr)
                got = None
            if got is None:
                tmux_failed += 1
            else:
                tmux_open.append(got[0])
                tmux_started.append(got[1])

        jobs: dict[str, Callable[[Path], None]] = {
            "zellij-swarm": run_zsw, "xargs": lambda d: measured("xargs", bare_xargs(d, "true")),
            "xargs+wrapper": run_xargs_wrapper, "parallel": run_parallel,
            PROGRAM_ZSW: lambda d: measured(PROGRAM_ZSW, zsw_run(d, commands(n, PROGRAM), j).proc),
            PROGRAM_XARGS: lambda d: measured(PROGRAM_XARGS, bare_xargs(d, PROGRAM)),
            "zsw-1k": run_1k, "sleep-100": run_sleep100, "xargs-sleep-100": run_xargs_sleep100,
            "refill-200": run_refill,
        }
        if not args.quick:
            jobs["zsw-10k"] = run_10k
        if have_tmux:
            jobs["tmux-32"] = run_tmux
        versus = list(walls)  # the runs the wall ratios compare: kept next to each other
        rest = [name for name in jobs if name not in versus]
        loads: list[float] = []  # the 1-minute load average after each round
        for r in range(args.rounds):
            t0 = time.perf_counter()
            group = versus[r % len(versus):] + versus[:r % len(versus)]
            for name in rest[r % len(rest):] + group + rest[:r % len(rest)]:
                jobs[name](work / f"round-{r}-{name}")
            loads.append(os.getloadavg()[0])
            print(f"round {r + 1}/{args.rounds} ({time.perf_counter() - t0:.0f} s): "
                  + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in walls.items()), file=sys.stderr)

        stuck = None if args.quick else stuck_zellij_refill(work)

        big: ZswRun | None = None
        big_records = 0
        status_json: list[float] = []
        status_text: list[float] = []
        resume_note: str | None = None
        resume_dispatch = resume_total = None
        if args.big:
            print(f"big: {big_n:,} tasks at -j {j}", file=sys.stderr)
            d = work / "big"
            d.mkdir()
            # `check=False`: "completes" is one of the rows, not a precondition.
            proc = timed([*ZSW, "run", "-j", str(j), "--backend", "headless", "--output", "quiet",
                          "--state-dir", str(d / "s"), str(commands(big_n))], cwd=d, check=False)
            run = only_run(d / "s")
            big = ZswRun(proc, d / "s", run, json.loads((run / "summary.json").read_text()))
            big_records = du(big.state)
            for _ in range(args.rounds):
                for out, extra in ((status_json, ["--json"]), (status_text, [])):
                    out.append(timed([*ZSW, "status", "--state-dir", str(big.state), *extra], cwd=d).wall)
            print(f"big: {proc.wall:.1f} s; killing a second run at 50 % and resuming it", file=sys.stderr)
            run2, resume_note = kill_at_half(work / "big-resume", commands(big_n), big_n, j,
                                             deadline_s=proc.wall + 60)
            if resume_note is None:
                started = time.time()
                p = timed([*ZSW, "resume", run2.name, "--state-dir", str(run2.parent.parent), "--output", "quiet"],
                          cwd=work / "big-resume", check=False)
                resume_total = p.wall
                resume_dispatch = first_dispatch_after(run2 / "events.jsonl", started)
                counts = json.loads((run2 / "summary.json").read_text()).get("counts", {})
                if p.code != 0 or counts.get("succeeded") != big_n:
                    resume_note = f"resume exited {p.code}, counts {counts}"

        # -------------------------------------------------------------------------- report
        m = {k: med(v) for k, v in walls.items()}
        mc = {k: med(v) for k, v in cpu.items()}

        def ratios(other: str) -> list[float]:
            """zellij-swarm's wall over ``other``'s, one per round: their median is the row."""
            return [z / o for z, o in zip(walls["zellij-swarm"], walls[other], strict=True)]
        print(f"\n{title}\n")
        print(f"{n:,} trivial tasks at -j {j}, median of {args.rounds} alternating round(s):")
        for k in walls:
            print(f"  {k:<15} {m[k]:7.3f} s wall   {mc[k]:6.2f} s CPU (whole tree)")
        print()

        rows: list[Row] = []
        rows.append(check(f"{n:,} × `true` at -j {j}, headless, wall vs bare `xargs -P {j} sh -c true`",
                          ratios("xargs"), 1.8, ratio, "≤ 1.8×", note=spread(ratios("xargs"), "×")))
        rows.append(check(f"same, vs `xargs -P {j}` running the same wrapper", ratios("xargs+wrapper"),
                          1.15, ratio, "≤ 1.15×", note=spread(ratios("xargs+wrapper"), "×")))
        estimate = (mc["zellij-swarm"] - mc["xargs+wrapper"]) / n * 1000
        if all(r.usage and "cpu_s" in r.usage for r in zsw_n):
            cpu_ms = [float(r.usage["cpu_s"]) / n * 1000 for r in zsw_n if r.usage]
            rows.append(check("CPU per task of all our processes (supervisor, launcher, any helper) beyond the wrapper",
                              cpu_ms, 0.3, lambda v: f"{v:.3f} ms", "≤ 0.3 ms", note="summary usage"))
            parts = [("supervisor", "cpu_s", "  of which the supervisor's own (its rusage)"),
                     ("supervisor", "loop_cpu_s",
                      "    of which its main thread: start-up and loop (the rest: log commit's folds, fsync)"),
                     ("launcher", "cpu_s", "  of which the launcher's own (its rusage)")]
            for process, key, label in parts:
                own = [float(u[key]) / n * 1000 for r in zsw_n
                       if isinstance(u := ((r.usage or {}).get("processes") or {}).get(process), dict) and key in u]
                if own:
                    rows.append(Row(label, f"{med(own):.3f} ms", note=spread(own, " ms")))
        else:
            rows.append(check("CPU per task of all our processes (supervisor, launcher, any helper) beyond the wrapper",
                              [estimate], 0.3, lambda v: f"{v:.3f} ms", "≤ 0.3 ms",
                              note="estimate: zsw tree CPU − xargs+wrapper CPU; no usage in summary"))
        rows.append(check(f"disk per trivial task once the run has ended (`du` of the state dir / {n:,} tasks)",
                          [b / KIB for b in disk_per_task], 6, lambda v: f"{v:.1f} KB", "≤ 6 KB",
                          note=f"{med(disk_per_task) * n / MIB:,.1f} MB in all"))
        label = "peak RSS summed over our processes, 10,000 queued tasks"
        if args.quick:
            rows.append(skipped(label, "≤ 45 MB", "--quick"))
        else:
            values, source = rss_figure(zsw_10k)
            rows.append(check(label, values, 45, lambda v: f"{v:.1f} MB", "≤ 45 MB", note=source))

        big_goal = f"completes; per-task wall ≤ +10 % of the {n:,}-task run's; ≤ 600 MB; ≤ 100 MB"
        if big is None:
            rows.append(skipped(f"{big_n:,} × `true` at -j {j}", big_goal, "no --big"))
            rows.append(skipped(f"`status --json` / `status` on the {big_n:,}-task run; `resume` of it killed at 50 %",
                                "< 1 s / < 1 s / < 10 s", "no --big"))
        else:
            counts = big.summary.get("counts", {})
            done = big.proc.code == 0 and counts.get("succeeded") == big_n
            rows.append(Row(f"{big_n:,} × `true` at -j {j}: completes", f"exit {big.proc.code}", "completes", done,
                            f"{counts.get('succeeded', 0):,} succeeded in {big.proc.wall:.1f} s; one run"))
            per_task = big.proc.wall / big_n / (m["zellij-swarm"] / n)
            rows.append(Row(f"  its per-task wall vs the {n:,}-task run's", f"{(per_task - 1) * 100:+.1f} %",
                            "within 10 %", per_task <= 1.10,  # faster is within it too
                            f"{big.proc.wall / big_n * 1000:.3f} ms vs {m['zellij-swarm'] / n * 1000:.3f} ms"))
            rows.append(Row("  its records (`du` of the state dir)", f"{big_records / MIB:,.1f} MB", "≤ 600 MB",
                            big_records / MIB <= 600, f"{big_records / big_n / KIB:.1f} KB per task"))
            values, source = rss_figure([big])
            rows.append(check("  its peak RSS summed over our processes", values, 100, lambda v: f"{v:.1f} MB",
                              "≤ 100 MB", note=source))
            rows.append(check(f"`status --json` on the {big_n:,}-task run", status_json, 1, lambda v: f"{v:.2f} s",
                              "< 1 s", strict=True))
            rows.append(check(f"`status` on the {big_n:,}-task run", status_text, 1, lambda v: f"{v:.2f} s",
                              "< 1 s", strict=True))
            label = f"`resume` of a {big_n:,}-task run killed at 50 %: until it dispatches again"
            if resume_note is not None or resume_dispatch is None:
                rows.append(Row(label, "failed", "< 10 s", False,
                                resume_note or "no task dispatched after the resume started"))
            else:
                rows.append(Row(label, f"{resume_dispatch:.2f} s", "< 10 s", resume_dispatch < 10,
                                f"the whole `resume` took {resume_total:.1f} s; the goal is on the first figure"))

        label = "32 tmux live panes in one batch, all opened"
        if args.quick:
            rows.append(skipped(label, "< 250 ms", "--quick"))
        elif not have_tmux:
            rows.append(skipped(label, "< 250 ms", "no tmux"))
        else:
            note = f"all 32 workers running after {med(tmux_started):.0f} ms" if tmux_started else ""
            note += f"; {tmux_failed} round(s) failed or did not open 32" if tmux_failed else ""
            rows.append(check(label, tmux_open, 250, lambda v: f"{v:.0f} ms", "< 250 ms", strict=True,
                              note=note.lstrip("; ")))
        rows.append(check("first batch of 100 headless workers, launch span (100 × `sleep 1` at -j 100)", spans100, 100,
                          ms, "< 100 ms", strict=True))
        rows.append(Row("  this machine's floor: `xargs -P 100` starting 100 × `sh -c`, first to last start",
                        ms(med(xargs_spans100)), note="no wrapper, no records; each start marked by a file's mtime"))
        rows.append(check("refill p95, 200 × `sleep 0.2` at -j 8 (not saturated), supervisor's monotonic clock",
                          refill_p95, 5, ms, "< 5 ms", strict=True))
        # The goal is on the supervisor's clock: a file's time is up to a kernel tick (4 ms at
        # 250 Hz) behind, so the difference of two is off by up to a tick either way — shown,
        # not judged.
        rows.append(Row("  the same from the generations' file times (a kernel tick coarse at each end)",
                        ms(med(refill_file_p95)), note=spread(refill_file_p95, " ms")))

        # informational rows, no goal
        rows.append(Row(f"zellij-swarm / GNU parallel, {n:,} × `true` at -j {j}",
                        ratio(med(ratios("parallel"))), note=spread(ratios("parallel"), "×")))
        # `true` is a builtin: the wrapper runs it in its own shell, as `sh -c true` does. A
        # program costs every runner its exec, and our wrapper its subshell's fork too.
        program = [z / x for z, x in zip(walls[PROGRAM_ZSW], walls[PROGRAM_XARGS], strict=True)]
        rows.append(Row(f"same as the first row with a program: {n:,} × `{PROGRAM}`, vs `xargs -P {j} sh -c {PROGRAM}`",
                        ratio(med(program)), note=spread(program, "×")))
        rows.append(Row("wrapper's own cost per task (xargs+wrapper − xargs)",
                        f"{(m['xargs+wrapper'] - m['xargs']) / n * 1000:.3f} ms wall, "
                        f"{(mc['xargs+wrapper'] - mc['xargs']) / n * 1000:.3f} ms CPU"))
        rows.append(Row("CPU per task beyond xargs+wrapper, estimate from wait4 (tree CPU)", f"{estimate:.3f} ms"))
        rows.append(Row(f"refill p50 / p95, {n:,} × `true` at -j {j} (saturated)",
                        f"{med([r.metrics['refill_latency_ms']['p50'] for r in zsw_n]):.1f} / "
                        f"{med([r.metrics['refill_latency_ms']['p95'] for r in zsw_n]):.1f} ms"))
        if stuck is None:
            rows.append(Row("headless refill p95 under zellij, every pane retitle hanging 10 s", "skipped (--quick)"))
        else:
            rows.append(Row("headless refill p95, 200 × `sleep 0.05` at -j 8 under zellij, one pane: "
                            "normal → every retitle hanging 10 s", f"{stuck[0]:.1f} → {stuck[1]:.1f} ms "
                            f"({stuck[1] - stuck[0]:+.1f})"))
        rows.append(Row("snapshot cost, 1,000 tasks", snapshot_cost(zsw_1k)))
        rows.append(Row("snapshot cost, 10,000 tasks", "skipped (--quick)" if args.quick else snapshot_cost(zsw_10k)))
        if big is not None:
            rows.append(Row(f"snapshot cost, {big_n:,} tasks", snapshot_cost([big])))
        print_table(rows)
        during = load_warning("during the runs", max(loads)) if loads else None
        for warning in (busy_before, during, load_warning("after the runs")):
            if warning:
                print(warning)
    finally:
        # after the report: removing a 100,000-task tree takes minutes
        print("bench: removing the runs' directories", file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
