"""The control inbox on the supervisor's side: ``cancel`` and ``add`` messages, and the
follow-ups a worker leaves in ``$ZELLIJ_SWARM_ARTIFACT_DIR/followups.jsonl``. Part of
``Supervisor`` (a mixin only to keep the modules small)."""

from __future__ import annotations

from pathlib import Path

from . import additions, exc, inbox, swarmfile
from .live import LiveGen
from .model import TaskRecord
from .states import TaskStatus


_DONE = {"cancel": "cancelled", "add": "added"}


class ControlMixin:
    def _read_inbox(self) -> None:
        for msg in inbox.pending(self.paths):
            if msg.id in self.applied_messages:  # applied before a crash, not yet moved away
                inbox.consume(self.paths, msg)
                continue
            self.applied_messages.add(msg.id)
            # Apply, then record, then move: a crash before the record leaves the message
            # to be applied again (cancel and add are safe to repeat); never lost.
            self._apply(msg)
            self.events.emit("inbox_consumed", id=msg.id, kind=msg.body.get("kind"))
            self.events.flush()
            inbox.consume(self.paths, msg)

    def _apply(self, msg: inbox.Message) -> None:
        body = msg.body
        if body.get("kind") == "add":
            self._apply_add(msg)
            return
        if body.get("kind") != "cancel":
            self._warn("invalid_message", f"inbox message {msg.id}: unknown kind {body.get('kind')!r}", None)
            return
        inbox.reply(self.paths, msg, self._apply_cancel(body.get("tasks") or []))

    def _apply_cancel(self, names: list[str]) -> dict:
        """Cancel the whole run, or the named tasks (names or ids); the reply says what it did."""
        if not names:
            self.cancelled = True
            self._stop_everything("cancelled_by_user")
            return {"ok": True, "cancelled": ["the whole run"]}
        cancelled, ended = [], []
        for name in names:
            task = self.by_name.get(name) or self.tasks.get(name)
            if task is None:
                self._warn("invalid_message", f"cancel: no task {name!r}", None)
            elif task.status == TaskStatus.PENDING:
                self.ready.discard(task.id)
                self._finalise(task, TaskStatus.CANCELLED, "cancelled_by_user")
                cancelled.append(task.name)
            elif task.status == TaskStatus.RUNNING and task.slot in self.live:
                self._kill(self.live[task.slot], "cancelled_by_user")
                cancelled.append(task.name)
            else:
                ended.append(task.name)
        return {"ok": bool(cancelled), "cancelled": cancelled, "already_ended": ended,
                **({} if cancelled else {"error": f"nothing to cancel: {', '.join(ended) or 'no such task'} "
                                                  f"already ended"})}

    def _answer_late_messages(self) -> None:
        """The run is over: a message that arrived while it ended (during the end-of-run
        sweep, say) is answered and put away, never silently dropped."""
        for msg in inbox.pending(self.paths):
            if msg.id not in self.applied_messages:
                inbox.reply(self.paths, msg, {"ok": False, "error": f"run {self.run_id} had already ended; "
                                                                    f"nothing was {_DONE.get(msg.body.get('kind'), 'done')}"})
                self.events.emit("inbox_consumed", id=msg.id, kind=msg.body.get("kind"), late=True)
            inbox.consume(self.paths, msg)

    def _apply_add(self, msg: inbox.Message) -> None:
        if self._stopping():
            inbox.reply(self.paths, msg, {"ok": False, "error": f"run {self.run_id} is stopping; nothing added"})
            return
        try:
            specs = additions.from_message(msg.body.get("tasks"), self.by_name, Path(self.plan.cwd))
        except exc.UsageError as e:
            inbox.reply(self.paths, msg, {"ok": False, "error": str(e)})
            return
        added = self._add_live(specs, source=f"add {msg.id}")
        inbox.reply(self.paths, msg, {"ok": True, "added": [t.name for t in added]})

    def _add_live(self, specs: list[swarmfile.TaskSpec], *, source: str) -> list[TaskRecord]:
        added = self._add_tasks(specs)
        for t in added:
            self.events.emit("task_added", task=t.name, id=t.id, source=source, spec=t.spec.to_record())
        self.snapshots.dirty = True
        return added

    def _consume_followups(self, lg: LiveGen) -> None:
        """Tasks the worker asked for in ``$ZELLIJ_SWARM_ARTIFACT_DIR/followups.jsonl``."""
        path = lg.gen.artifacts / additions.FOLLOWUPS
        if not path.exists():
            return
        batch = additions.from_followups(path, lg.task.name, self.by_name, Path(self.plan.cwd))
        self.events.emit("followups_consumed", task=lg.task.name, slot=lg.gen.slot, gen=lg.gen.gen,
                         added=len(batch.specs), duplicates=batch.duplicates)
        for error in batch.errors:
            self._warn("invalid_followup", error, lg.task)
        if batch.specs and self._stopping():
            self._warn("invalid_followup", f"{len(batch.specs)} follow-up(s) ignored: the run is stopping", lg.task)
        elif batch.specs:
            self._add_live(batch.specs, source=f"followup {lg.gen.slot}/{lg.gen.gen}")
