"""The Zellij backend across versions × inside/outside × UI mode × require (issue 11).

One swarm of mixed outcomes (successes, a failure, backfill) per combination, against the
fake zellij: each task runs exactly once, outcomes and warnings are the ones that version
and place call for, and nothing of the run is left running. CI runs a pairwise subset (every
pair of values appears in some combination); ``scripts/zellij-matrix`` runs all 40
(``ZSW_FULL_MATRIX=1``)."""

from __future__ import annotations

import itertools
import os

import pytest
from swarmtest import run_processes
from zellijtest import FAST

VERSIONS = ["0.40.1", "0.41.2", "0.43.1", "0.44.3", "0.45.0"]
DIMENSIONS = [VERSIONS, ["inside", "outside"], ["live", "compact"], [False, True]]

SWARM = "[swarm]\njobs = 2\n" + "".join(f'[[task]]\nname = "{n}"\ncmd = "{c}; echo {n} >> ledger"\n' for n, c in [
    ("a", "true"), ("b", "sleep 0.3"), ("c", "true"), ("d", "true")]) + \
    '[[task]]\nname = "bad"\ncmd = "echo bad >> ledger; exit 3"\n'


def pairwise(dimensions: list[list]) -> list[tuple]:
    """A small set of combinations covering every pair of values of any two dimensions
    (greedy: take the combination that covers most uncovered pairs until none is left)."""
    every = list(itertools.product(*dimensions))

    def pairs(combo: tuple) -> set:
        return {(i, combo[i], j, combo[j]) for i, j in itertools.combinations(range(len(combo)), 2)}

    uncovered = set().union(*map(pairs, every))
    chosen = []
    while uncovered:
        best = max(every, key=lambda c: len(pairs(c) & uncovered))
        chosen.append(best)
        uncovered -= pairs(best)
    return chosen


COMBINATIONS = list(itertools.product(*DIMENSIONS)) if os.environ.get("ZSW_FULL_MATRIX") else pairwise(DIMENSIONS)


def test_the_pairwise_subset_covers_every_pair():
    combos = pairwise(DIMENSIONS)
    for i, j in itertools.combinations(range(len(DIMENSIONS)), 2):
        assert {(c[i], c[j]) for c in combos} == set(itertools.product(DIMENSIONS[i], DIMENSIONS[j]))
    assert len(combos) < len(list(itertools.product(*DIMENSIONS))) / 2


@pytest.mark.parametrize("version,where,ui,require", COMBINATIONS,
                         ids=["-".join(map(str, c)) for c in COMBINATIONS])
def test_matrix(swarm, fz, version, where, ui, require):
    inside = None
    if where == "inside":
        fz.host("host", version, client=True)
        inside = "host"
    swarm.write("sw.toml", SWARM)
    res = swarm("run", "sw.toml", "--backend", "zellij", "--ui", ui, *(["--require-zellij"] if require else []),
                env=fz.env(version, inside=inside, **FAST), timeout=90)
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
    assert res.code == 1, res.stderr
    run = swarm.latest()
    rows = swarm.tasks()
    warnings = [w["code"] for w in swarm.summary()["warnings"]]
    # Before 0.44 a detached session (outside) has no client, and `run` places no pane there.
    degraded = ui == "live" and where == "outside" and version < "0.44"
    if degraded and require:
        assert {(r["status"], r["reason"], r["attempts"]) for r in rows.values()} == {
            ("cancelled", "zellij_live_degraded_to_compact", 0)}
        assert not (swarm.cwd / "ledger").exists()
    else:
        assert {n: r["status"] for n, r in rows.items()} == {
            "a": "succeeded", "b": "succeeded", "c": "succeeded", "d": "succeeded", "bad": "failed"}
        assert sorted((swarm.cwd / "ledger").read_text().split()) == ["a", "b", "bad", "c", "d"]
        assert warnings == (["live_degraded_to_compact"] if degraded else [])
        in_panes = {n for n, r in rows.items() if r["history"][-1]["pane_id"]}
        # live: every worker in its pane (ids from Zellij from 0.44, from the heartbeat before)
        assert in_panes == (set(rows) if ui == "live" and not degraded else set()), rows
    assert run_processes(run.name) == []
