"""What a ``retry`` leaves in the run's records when its supervisor is killed early."""

from __future__ import annotations

import json

import harness
from harness import Harness, Work, task


def test_a_retry_says_the_run_runs_before_it_starts_any_worker(monkeypatch):
    """The retry removed the earlier end's summary but left its state.json, which says the run
    ended, until its first snapshot — written after its first workers were started. A retry
    killed in between left a run that read ``finished`` with a worker running, and ``resume``
    refused it (seen once in CI-like load: test_retry's kill of the retry)."""
    seen: list[str] = []
    submit = harness.FakeLauncher.submit

    def submit_and_look(self, requests):  # what a reader of the run sees as its workers start
        run = self.world.run
        if run.state.exists():  # (the first run's first batch comes before its first snapshot)
            seen.append(json.loads(run.state.read_text())["state"])
        submit(self, requests)

    monkeypatch.setattr(harness.FakeLauncher, "submit", submit_and_look)
    works = {"flaky": (Work(after=1, code=3), Work(after=5))}
    with Harness(works=works) as h:
        assert h.run([task("flaky")]).tasks["flaky"].status == "failed"
        seen.clear()
        again = h.retry()
    assert again.tasks["flaky"].status == "succeeded"
    assert seen == ["running"]
