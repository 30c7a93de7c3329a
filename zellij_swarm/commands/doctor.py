"""``zellij-swarm doctor``: what ``auto`` would pick and why, the multiplexers found and
what they can do, and the settings this environment resolves to.

Every setting shows its source and what its default is. A setting nobody set whose default
is "none" or "decided later" (``timeout``, ``session``, ``output``) has the value ``null`` in
``--json``, as ``run.json`` records it; its ``default`` field says what that means, and the
text shows the meaning instead of ``None``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from zellij_swarm import exc, quoting
from zellij_swarm.backends.select import choose
from zellij_swarm.backends.tmux_client import TESTED, WORKS_SINCE, TmuxClient
from zellij_swarm.backends.zellij_cli import VERIFIED_REAL, caller_session
from zellij_swarm.backends.zellij_cli import detect as detect_zellij
from zellij_swarm.config import settings
from zellij_swarm.external import EXECUTOR
from zellij_swarm.external import run as run_command
from zellij_swarm.records import rundir
from zellij_swarm.worker import waiting
from zellij_swarm.worker.slurm import Slurm


def _tmux(env: Mapping[str, str]) -> dict[str, Any]:
    """The tmux found: its version (``tmux 3.3a``, None when there is none that answers),
    whether it is the tested one, old enough to warn (below 3.2), too old to use; and, when
    a tmux binary is there but cannot be used, why (``problem``: no answer, no libtmux)."""
    info: dict[str, Any] = {"version": None, "tested": False, "old": False, "too_old": False,
                            "inside_session": bool(env.get("TMUX"))}
    client = TmuxClient(env, timeout=5)
    if client.binary is None:
        return info
    try:
        version = client.version()
    except exc.BackendError as e:
        info["problem"] = e.message
        return info
    info.update(version=f"tmux {version.text}", tested=version.tested, too_old=version.too_old,
                old=version.untested_old)
    return info


def _tmux_line(t: Mapping[str, Any]) -> str:
    if t.get("problem"):
        return f"tmux: not usable: {t['problem'].removeprefix('tmux: ')}"
    line = f"tmux: {t['version'] or 'not found'}"
    if t["version"] and t["tested"]:
        line += " (tested)"
    elif t["version"] and t["too_old"]:
        line += f" (too old: zellij-swarm needs tmux {'.'.join(map(str, WORKS_SINCE))} or later)"
    elif t["version"]:
        line += f" (untested: zellij-swarm is tested with tmux {'.'.join(map(str, TESTED))}; it runs" + (
            ", and a pane that ended shows tmux's \"Pane is dead\" line)" if t.get("old") else ")")
    return line + ("; inside a session" if t.get("inside_session") else "")


def report(env: Mapping[str, str], flags: Mapping[str, object] | None = None) -> dict[str, Any]:
    """The doctor's findings, as ``--json`` prints them. ``settings`` is ``{name: {"value",
    "source", "default"}}``: the first two as ``run.json`` records them, ``default`` what the
    setting is when nothing sets it, in words (``"5s"``, ``"none (no limit)"``). ``flags``:
    the settings doctor itself was given (``--executor``), over the environment's."""
    info: dict[str, Any] = {
        "zellij": detect_zellij(env),
        "tmux": _tmux(env),
        "settings": {},
    }
    try:
        resolved = settings.resolve(flags or {}, env)
        info["settings"] = {name: {**entry, "default": settings.default_text(name)}
                            for name, entry in resolved.as_record().items()}
        choice = choose(resolved.backend, env)
    except exc.SettingError as e:
        info["error"] = str(e)
        choice = choose("auto", env)
    info["backend"] = {"name": choice.name, "why": choice.why}
    info["waiting_input"] = {"syscall_evidence": waiting.evidence_here() or "available"}
    return info


def format_report(info: dict[str, Any], env: Mapping[str, str]) -> list[str]:
    """The lines ``doctor`` prints without ``--json``, each safe to print (``terminal_text``)."""
    lines = [f"backend (auto): {info['backend']['name']} — {info['backend']['why']}"]
    z = info["zellij"]
    line = f"zellij: {z['version'] or 'not usable'}"
    if z.get("binary"):
        line += f" at {z['binary']}" + (" (the tests' fake zellij)" if z.get("fake") else "")
    if z.get("error"):
        line += f" ({z['error']})"
    elif not z.get("tested"):
        line += " (untested version: zellij-swarm is tested with 0.40–0.45; it runs, with this warning)"
    elif not z.get("fake"):
        line += (" (verified on a real binary)" if z.get("verified_on_real") else
                 f" (covered by the contract; verified on a real binary: {', '.join(VERIFIED_REAL)})")
    if z.get("inside_session"):
        line += f"; inside session {z.get('session')!r}"
    lines.append(line)
    if z.get("capabilities"):
        on = [k for k, v in z["capabilities"].items() if v is True and k != "tested"]
        lines.append(f"  capabilities: {', '.join(on) or 'none'}")
    lines.append(_tmux_line(info["tmux"]))
    evidence = info["waiting_input"]["syscall_evidence"]
    lines.append("waiting for input: " + ("seen from the kernel and the screen" if evidence == "available" else
                                          f"{evidence}: seen from /proc/PID/wchan, the open files and the screen"))
    if info.get("error"):
        lines.append(f"settings: error: {info['error']}")
    for name, entry in info["settings"].items():
        lines.append(f"  {name} = {_effective(name, entry, info['backend']['name'], env)}  ({_origin(name, entry)})")
    return [quoting.terminal_text(line) for line in lines]  # names from the environment included


def _effective(name: str, entry: Mapping[str, Any], backend: str, env: Mapping[str, str]) -> str:
    """The value a run started here would use. An unset ``session`` is known here (the
    session we are in, or the one a run would create); other ``None`` defaults are said in
    words (``none (no limit)``, ``progress on a TTY, else group``)."""
    if entry["value"] is not None:
        return settings.shown(name, entry["value"])
    if name == "session":
        if backend == "zellij" and (own := caller_session(env)):
            return f"{own} (the current zellij session)"
        if backend == "tmux" and env.get("TMUX"):
            return "the current tmux session"
        return "swarm-<run-id> (a session of the run's own)"
    return str(entry.get("default") or settings.default_text(name))


def _origin(name: str, entry: Mapping[str, Any]) -> str:
    """Where the value came from; for a default whose value does not say what it is, that
    too (``jobs = 8  (default: the number of usable CPUs)``)."""
    if entry["source"] != "default":
        return str(entry["source"])
    spec = settings.BY_NAME.get(name)
    if spec is not None and spec.default_text and entry["value"] is not None:
        return f"default: {spec.default_text}"
    return "default"


PROBE_TIMEOUT = 30.0  # seconds a probe step may take, queueing included


def slurm_report(env: Mapping[str, str], state_dir: Path) -> dict[str, Any]:
    """``doctor --executor slurm``: the cluster (Slurm version, cluster name, partitions,
    nodes) and, for every node that is up, whether a step there can write a file into
    ``state_dir`` that this machine then reads back — the run directory must be shared.
    ``ok`` is False when Slurm cannot be reached or any node fails the probe."""
    cluster = Slurm(env)
    try:
        info: dict[str, Any] = cluster.describe()
    except exc.BackendError as e:
        return {"ok": False, "error": str(e), "state_dir": str(state_dir), "probes": {}}
    rundir.make_private_dir(state_dir, exist_ok=True)
    up = [name for name, state in info["nodes"] if not state.rstrip("*~#!%$@^-").endswith(("down", "drain",
                                                                                           "drained", "fail"))]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(16, len(up)))) as pool:
        probes = dict(zip(up, pool.map(lambda node: _probe(cluster, node, state_dir), up), strict=True))
    info.update(state_dir=str(state_dir), probes=probes, ok=bool(up) and all(p == "ok" for p in probes.values()),
                accounting=_accounting(env))
    if not up:
        info["error"] = "no node of the cluster is up"
    return info


def _accounting(env: Mapping[str, str]) -> dict[str, Any]:
    """Whether Slurm's accounting answers (``sacct``): without it, what a run knows of a step
    is what ``squeue`` showed while it ran and what its wrapper recorded."""
    try:
        res = run_command(["sacct", "--noheader", "-X", "--format=JobID", "--starttime=now"], timeout=PROBE_TIMEOUT,
                          env=env, check=False, faults=EXECUTOR)
    except exc.BackendError as e:
        return {"available": False, "why": str(e)}
    said = (res.stderr.strip() or res.stdout.strip()).splitlines()
    return {"available": res.returncode == 0, "why": None if res.returncode == 0 else
            (said[-1] if said else f"sacct exited {res.returncode}")}


def _probe(cluster: Slurm, node: str, state_dir: Path) -> str:
    """"ok", or what went wrong: a step on ``node`` writes a token into ``state_dir``."""
    token = secrets.token_hex(8)
    path = state_dir / f".probe-{node}-{token}"
    try:
        res = cluster.probe(node, ["/bin/sh", "-c", 'printf %s "$1" > "$2"', "sh", token, str(path)],
                            timeout=PROBE_TIMEOUT)
        if res:
            return res
        try:
            seen = path.read_text()
        except OSError as e:
            return f"the step wrote nothing this machine can read at {path} ({e.strerror}): not a shared filesystem?"
        return "ok" if seen == token else f"{path} holds something else than the step wrote"
    finally:
        with contextlib.suppress(OSError):
            path.unlink()


def format_slurm(info: dict[str, Any]) -> list[str]:
    lines = [f"slurm: {info.get('version') or 'not reachable'}"
             + (f", cluster {info['cluster']}" if info.get("cluster") else "")]
    if info.get("error"):
        lines.append(f"  error: {info['error']}")
    for p in info.get("partitions", []):
        lines.append(f"  partition {p['name']}: {p['available']}, {p['nodes']} node(s), {p['state']}")
    if (accounting := info.get("accounting")) and not accounting["available"]:
        lines.append(f"  accounting: not configured ({accounting['why']}): what a run knows of a step is what squeue "
                     "showed while it ran and what its wrapper recorded")
    for node, result in info.get("probes", {}).items():
        lines.append(f"  node {node}: {'writes ' + info['state_dir'] if result == 'ok' else 'PROBLEM: ' + result}")
    lines.append("  shared records: " + ("ok" if info.get("ok") else "NOT usable for --executor slurm"))
    return [quoting.terminal_text(line) for line in lines]
