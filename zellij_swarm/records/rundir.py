"""Where a run's files live, the primitives every writer and reader of them uses, and the
rule for trusting a state directory (``untrusted``).

Layout (SPEC §5, §7)::

    <state-dir>/.gitignore                     ignores everything
    <state-dir>/runs/<run-id>/                 every directory mode 0700, owned by the user
        run.json  events.jsonl  state.json  summary.json  environ (0600)  lock
        .reserve                               room for the last records (log.SpaceReserve)
        worker.sh                              the run's headless wrapper (generation_files)
        inbox/                                 control messages, one file each
        inbox/consumed/                        messages already applied
        views/<view>.json                      the run's board/slot-view panes (view_watch)
        slots/slot-<n>/gen-<m>/                one directory per generation (generation_files)

Run ids start with the UTC start time, so they sort by age; ``find_run`` still orders by
the recorded start time rather than trusting names.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from zellij_swarm import exc, jsontext
from zellij_swarm.config.state_dir import StateDir
from zellij_swarm.jsontext import compact
from zellij_swarm.records.generation_files import EXIT_RECORD, GenPaths

_SLOT_DIR = re.compile(r"slot-(\d+)\Z")
_GEN_DIR = re.compile(r"gen-(\d+)\Z")


# A rename is atomic but not durable: after a power loss the new name can point at a file whose
# data never reached the disk, which reads back as zero bytes. These files are the commit
# points readers trust ("this generation ended", "this run exists", "this run finished"), so
# their data and the rename are flushed to disk; the frequent snapshots and messages are not.
COMMIT_MARKERS = frozenset({EXIT_RECORD, "run.json", "summary.json"})


def open_to_write(path: str | os.PathLike[str], flags: int = 0, mode: int = 0o666) -> int:
    """A descriptor to write ``path`` through (``flags`` added to ``O_WRONLY``): a file made or
    opened, a device, a FIFO. Non-blocking for the open only: a FIFO nobody reads fails at
    once (ENXIO, ``unwritable_why``) rather than holding its caller for ever; the writes that
    follow block as any do."""
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC | os.O_NONBLOCK | flags, mode)
    os.set_blocking(fd, True)
    return fd


def flock_within(fd: int, seconds: float, *, every: float) -> bool:
    """Take an exclusive ``flock`` on ``fd``, looking again every ``every`` seconds for at most
    ``seconds`` while another holds it: False when it was not let go by then. Another error
    (no ``flock`` on this file system) is raised."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(every)


def unwritable_why(e: OSError) -> str:
    """Why a file could not be written, for a one-line message."""
    return "no process reads that FIFO" if e.errno == errno.ENXIO else e.strerror or str(e)


def write_atomic(path: Path, data: str | bytes | Iterable[bytes], *, mode: int = 0o600) -> None:
    """Write ``path`` so that no reader ever sees a partial file (temp file + rename), and
    durably when it is one of the ``COMMIT_MARKERS``. ``data`` may come in chunks (a run's
    summary: its rows as the rows file has them, never all encoded at once).

    The temp file is created with O_EXCL|O_NOFOLLOW, so a planted symlink is never followed.
    Its name is the writer's thread's own (threads of one program, each starting a run in a
    new state dir, write its ``.gitignore`` at once).
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_native_id()}.tmp")
    chunks = [data.encode()] if isinstance(data, str) else [data] if isinstance(data, bytes) else data
    durable = path.name in COMMIT_MARKERS
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json_atomic(path: Path, obj: Any) -> None:
    """Compact JSON: the C encoder is several times faster than an indenting one, and
    snapshots of thousands of tasks are written while the run goes on."""
    write_atomic(path, compact(obj) + "\n")


def json_chunks(head: dict[str, Any], key: str, items: Iterable[Any]) -> Iterator[bytes]:
    """``head`` with ``key`` added last, holding ``items`` as a list, as compact JSON in
    chunks for ``write_atomic``: one element encoded at a time, so the record of a run of
    100,000 tasks never stands in memory whole, as objects or as one string (it was the
    peak of such a run's memory)."""
    opening = compact(head)[:-1]  # "{...", its closing brace left out
    yield f'{opening}{"," if head else ""}{compact(key)}:['.encode()
    separator = b""
    for item in items:
        yield separator + compact(item).encode()
        separator = b","
    yield b"]}\n"


def write_new(path: Path, data: str, *, mode: int) -> None:
    """Create a file nobody reads yet (a generation's wrapper): O_EXCL, no rename needed."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(data)


ROOM = 256 << 10  # bytes: free space a full state directory needs again before new tasks start


def has_room(path: Path) -> bool:
    """The filesystem holding ``path`` is writable and has ``ROOM`` free again."""
    try:
        st = os.statvfs(path)
    except OSError:
        return False
    return not st.f_flag & os.ST_RDONLY and st.f_bavail * st.f_frsize >= ROOM


def unwritable(path: Path) -> bool:
    """The filesystem holding ``path`` is full or read-only."""
    try:
        st = os.statvfs(path)
    except OSError:
        return True
    return bool(st.f_flag & os.ST_RDONLY) or st.f_bavail == 0


class DamagedRecord(exc.SwarmError, ValueError):
    """A JSON record that exists but does not parse (truncated or overwritten). Also a
    ``ValueError``, so readers that skip unreadable records still skip it, and a
    ``SwarmError``, so one that reaches the CLI is one line, never a traceback."""


class UnsafeRecord(exc.SwarmError, OSError):
    """A record or log of a run that is a symbolic link where a file should be: never read
    through (another user could have planted it to have us read or write their target) — or
    no plain file at all (a FIFO a worker made there would block its reader for ever, a
    directory cannot be read). Also an ``OSError``, so readers that skip an unreadable record
    skip it, and a ``SwarmError``, so one that reaches the CLI is one line naming it."""

    def __init__(self, path: str | os.PathLike[str], kind: str | None = None) -> None:
        where = Path(path)
        run = next((p for p in where.parents if p.parent.name == "runs"), where.parent)
        why = (f"is {kind}, not a plain file: a run's records are read from plain files only" if kind else
               "is a symbolic link: a run's records are never read through one (another user could have planted it)")
        super().__init__(f"{where} {why}; remove it, or the run ({run})")
        self.errno, self.filename = errno.ELOOP, str(where)


def open_record(path: str | os.PathLike[str]) -> int:
    """A read-only descriptor of a record or log inside a run directory, opened without
    following a symlink and only when it is a plain file (``UnsafeRecord``);
    ``FileNotFoundError`` when there is none."""
    return open_record_stat(path)[0]


def open_record_stat(path: str | os.PathLike[str]) -> tuple[int, os.stat_result]:
    """``open_record``, with the file's status. The open never waits (``O_NONBLOCK``: a FIFO
    put in a record's place is refused, not waited on). A record whose directory is a file
    now (a worker replaced its generation's directory) is not there: ``FileNotFoundError``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as e:
        if e.errno == errno.ENOTDIR:
            raise FileNotFoundError(errno.ENOENT, f"{e.strerror} (a file in the place of its directory)",
                                    os.fspath(path)) from None
        if e.errno == errno.ELOOP:
            raise UnsafeRecord(path) from None
        if e.errno in (errno.ENXIO, errno.ENODEV):  # a socket, a device with no driver: no file
            raise UnsafeRecord(path, "a socket or device") from None
        raise
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise UnsafeRecord(path, _FILE_KINDS.get(stat.S_IFMT(st.st_mode), "a special file"))
    return fd, st


def plain_or_absent(path: str | os.PathLike[str]) -> None:
    """``UnsafeRecord`` unless ``path`` is a plain file or nothing: for a record a command is
    about to append to (a FIFO would hold its writes, a link would lead them elsewhere)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeRecord(path)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeRecord(path, _FILE_KINDS.get(stat.S_IFMT(st.st_mode), "a special file"))


_FILE_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket",
               stat.S_IFCHR: "a device", stat.S_IFBLK: "a device"}


def read_record_tail(path: str | os.PathLike[str], at_most: int) -> bytes:
    """The last ``at_most`` bytes of a record or log, opened as ``open_record_stat`` does
    (what a worker's output, srun's words or a heartbeat ended with)."""
    fd, st = open_record_stat(path)
    try:
        return os.pread(fd, at_most, max(st.st_size - at_most, 0))
    finally:
        os.close(fd)


def read_record(path: str | os.PathLike[str], limit: int = -1) -> bytes:
    """The bytes of a record (at most ``limit``; all with -1), opened as ``open_record`` does.
    Read with ``os.read``, not through a file object, which makes three system calls more
    (``fstat``, ``ioctl``, ``lseek``) — for each of a few files of every generation folded."""
    fd = open_record(path)
    try:
        chunks = []
        wanted = limit  # bytes still wanted; below 0: all there is
        while wanted:
            chunk = os.read(fd, wanted if wanted > 0 else 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            if wanted > 0:
                wanted -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_json(path: Path) -> dict[str, Any]:
    """A JSON record: an object. A zero-length file counts as absent (``FileNotFoundError``): it is what
    a crash between creating a file and writing it leaves, as for sidecars (SPEC §7); a
    record that does not parse raises ``DamagedRecord``, naming the file; a symlink,
    ``UnsafeRecord``."""
    data = read_record(path)
    if not data:
        raise FileNotFoundError(errno.ENOENT, "empty record (counts as absent)", str(path))
    try:
        record = jsontext.loads(data)
    except ValueError as e:
        raise DamagedRecord(f"{path}: damaged record (not valid JSON: {e}); it cannot be read") from None
    if not isinstance(record, dict):  # every record of ours is a JSON object
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(record), "a number")
        raise DamagedRecord(f"{path}: damaged record (JSON {kind}, not an object); it cannot be read")
    return record


def has_record(path: Path) -> bool:
    """``path`` holds a record: it exists and is not empty (see ``read_json``)."""
    try:
        return os.stat(path).st_size > 0
    except (FileNotFoundError, NotADirectoryError):  # also: a stray file where a run's directory would be
        return False


@dataclass(frozen=True)
class RunPaths:
    dir: Path

    @property
    def run_id(self) -> str:
        return self.dir.name

    @property
    def state_dir(self) -> Path:
        """The state directory the run's records are in (``<state-dir>/runs/<run-id>``)."""
        return self.dir.parent.parent

    @property
    def run_json(self) -> Path:
        return self.dir / "run.json"

    @property
    def events(self) -> Path:
        return self.dir / "events.jsonl"

    @property
    def worker_script(self) -> Path:
        """The run's one headless wrapper (``wrapper.run_script``)."""
        return self.dir / "worker.sh"

    @property
    def state(self) -> Path:
        return self.dir / "state.json"

    @property
    def summary(self) -> Path:
        return self.dir / "summary.json"

    @property
    def saved_env(self) -> Path:
        """The caller's environment (``envfile``)."""
        return self.dir / "environ"

    @property
    def lock(self) -> Path:
        return self.dir / "lock"

    @property
    def views(self) -> Path:
        """The registrations of the run's board and slot-view panes (``engine.view_watch``)."""
        return self.dir / "views"

    @property
    def alive(self) -> Path:
        """Who supervises the run, from where, and when it last said so (``runlock``): what
        another host, which cannot see the lock, judges the run by."""
        return self.dir / "alive.json"

    @property
    def inbox(self) -> Path:
        return self.dir / "inbox"

    @property
    def consumed(self) -> Path:
        return self.dir / "inbox" / "consumed"

    @property
    def replies(self) -> Path:
        return self.dir / "inbox" / "replies"

    @cached_property
    def slots(self) -> Path:
        return self.dir / "slots"

    def slot_dir(self, slot: int) -> Path:
        """Joined once per slot: a resume names every generation of a 100,000-task run, and a
        pathlib join costs more than anything else it does for one."""
        joined = self._slot_dirs.get(slot)
        if joined is None:
            joined = self._slot_dirs[slot] = self.slots / f"slot-{slot}"
        return joined

    @cached_property
    def _slot_dirs(self) -> dict[int, Path]:
        return {}

    def gen(self, slot: int, gen: int) -> GenPaths:
        return GenPaths(self.slot_dir(slot) / f"gen-{gen}", slot, gen)

    def generations(self, slot: int) -> list[GenPaths]:
        """The slot's generation directories in numeric order (never by name padding). The
        slot's path is joined once: the proof lists 10,000 generations."""
        slot_dir = self.slot_dir(slot)
        try:
            names = os.listdir(slot_dir)
        except FileNotFoundError:
            return []
        found = [(int(m.group(1)), n) for n in names if (m := _GEN_DIR.match(n))]
        return [GenPaths(slot_dir / name, slot, g) for g, name in sorted(found)]

    def generations_on_disk(self) -> dict[tuple[int, int], GenPaths]:
        """Every generation directory of the run by (slot, generation); those folded away
        are not here, only in the event log (``generation_files.OUTCOME_EVENTS``)."""
        return {(g.slot, g.gen): g for slot in self.slot_numbers() for g in self.generations(slot)}

    def slot_numbers(self) -> list[int]:
        try:
            names = os.listdir(self.slots)
        except FileNotFoundError:
            return []
        return sorted(int(m.group(1)) for n in names if (m := _SLOT_DIR.match(n)))


def runs_root(state_dir: Path) -> Path:
    return state_dir / "runs"


def make_private_dir(path: Path, *, exist_ok: bool = True) -> None:
    """Create the directory ``path`` (and any missing parents) with mode 0700. ``mkdir``'s
    mode is filtered through the umask: when the umask takes away some of the owner's bits
    the mode is set again explicitly (one syscall more, only then: this runs twice per task)."""
    try:
        os.mkdir(path, 0o700)
    except FileNotFoundError:
        make_private_dir(path.parent)  # missing parents are made private too
        try:
            os.mkdir(path, 0o700)
        except FileNotFoundError:  # a parent that is there and still holds nothing: said, not tried again
            raise FileNotFoundError(errno.ENOENT, _holds_nothing(path.parent), str(path)) from None
        except FileExistsError:
            if not exist_ok:
                raise
            return
    except FileExistsError:  # also: created meanwhile, by another run starting in the same state dir
        if not exist_ok:
            raise
        return
    if _UMASK & 0o700:
        os.chmod(path, 0o700)


def _holds_nothing(directory: Path) -> str:
    """Why no directory can be made in ``directory``, which ``mkdir`` finds there."""
    if directory.is_symlink() and not directory.exists():
        return f"{directory} is a symbolic link to {os.readlink(directory)}, which does not exist"
    return f"no directory can be made in {directory}"


def _read_umask() -> int:
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # read once, at import, before any thread could race on it


def untrusted(state_dir: Path) -> str | None:
    """Why the records under ``state_dir`` could have been written by someone else, or None.

    The rule ssh applies to ``~/.ssh``: the state directory and its ``runs/`` must belong to
    the current user and be writable by nobody else. Otherwise another user could replace a
    run's ``run.json`` and have ``resume`` run their commands as this user. A directory that
    does not exist yet is not a problem (it will be created private) — unless a directory
    above it lets anyone replace it (``_open_parent``)."""
    me = os.geteuid()
    for path in (state_dir, runs_root(state_dir)):
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return _open_parent(state_dir)
        except OSError as e:
            return f"cannot check state directory {path}: {e.strerror}"
        if not stat.S_ISDIR(st.st_mode):
            return f"state directory {path} is not a directory"
        if st.st_uid != me:
            return (f"state directory {path} belongs to uid {st.st_uid}, not to you (uid {me}): another user could "
                    f"change its run records; use a --state-dir of your own")
        if st.st_mode & 0o022:
            return (f"state directory {path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o}): "
                    f"another user could change its run records; make it private: chmod 700 {path}")
    return _open_parent(state_dir)


def _open_parent(state_dir: Path) -> str | None:
    """A directory above ``state_dir`` that anyone may write and that has no sticky bit: there,
    anyone can rename the state directory away and put one of theirs in its place (ssh refuses
    such a directory above ``~/.ssh``). ``/tmp``, world-writable but sticky, is fine. The path
    is checked as given and as resolved: a symlink on the way is in a directory too."""
    given, real = Path(state_dir).absolute(), Path(os.path.realpath(state_dir))
    for parent in dict.fromkeys([*given.parents, *real.parents]):
        try:
            mode = os.stat(parent).st_mode
        except OSError:
            continue  # not made yet: it will be made private
        if mode & 0o002 and not mode & stat.S_ISVTX:
            return (f"state directory {state_dir} is in {parent}, which anyone may write (mode "
                    f"{stat.S_IMODE(mode):04o}, no sticky bit): another user could put a state directory of theirs "
                    f"in its place; use a --state-dir elsewhere")
    return None


def untrusted_run(run: RunPaths, *, generations: bool = False) -> str | None:
    """Why a run's own records could have been written by someone else, or None: the rule of
    ``untrusted`` for the run directory and the records a writer acts on (``run.json`` holds
    the commands ``resume`` runs, ``environ`` the environment they get, ``events.jsonl`` the
    tasks added since, ``inbox/`` the messages the supervisor obeys, ``slots/`` and its slot
    directories the generations whose records ``resume`` reads and whose wrappers write
    there). Each must belong to the current user and be writable by nobody else; a symlink
    among them is refused too (``lstat``). With ``generations``, every generation directory
    too (a few thousand ``lstat`` calls: for the commands that act on the run). A record that
    does not exist yet is not a problem."""
    slots = [run.slot_dir(n) for n in run.slot_numbers()]
    for path in (run.dir, run.run_json, run.events, run.saved_env, run.inbox, run.slots, *slots):
        if problem := _untrusted_record(run, path):
            return problem
    for slot in slots if generations else []:
        try:
            with os.scandir(slot) as entries:  # one lstat each, no path objects: 10,000 of them
                gens = [(Path(e.path), e.stat(follow_symlinks=False)) for e in entries if _GEN_DIR.match(e.name)]
        except FileNotFoundError:
            continue
        for path, st in gens:
            if problem := _untrusted_record(run, path, st):
                return problem
    return None


def _untrusted_record(run: RunPaths, path: Path, st: os.stat_result | None = None) -> str | None:
    """The rule of ``untrusted_run`` for one record (``st``: its ``lstat``, when known)."""
    me = os.geteuid()
    try:
        st = st or os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"cannot check run record {path}: {e.strerror}"
    if stat.S_ISLNK(st.st_mode):
        return (f"run record {path} is a symbolic link: another user could have planted it; "
                f"remove the run ({run.dir}) or check it by hand")
    if st.st_uid != me:
        return (f"run record {path} belongs to uid {st.st_uid}, not to you (uid {me}): another user could "
                f"change what this run runs; remove the run ({run.dir}) or check it and chown it to yourself")
    if st.st_mode & 0o022:
        return (f"run record {path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o}): "
                f"another user could change what this run runs; check it, then make it private: "
                f"chmod -R go-w {run.dir}")
    return None


def require_trusted_run(run: RunPaths) -> None:
    """Refuse (exit 2) a run whose records another user could have written (``untrusted_run``,
    its generation directories included: the caller acts on the run)."""
    problem = untrusted_run(run, generations=True)
    if problem:
        raise exc.UsageError(problem)


def require_writable_run(run: RunPaths) -> None:
    """Refuse (exit 2), before anything is done, a run to be supervised again (``resume``,
    ``retry``) whose directory cannot be written — a read-only or full state directory — as
    ``run`` refuses such a state directory, rather than fail on the run's lock."""
    try:
        check_can_create(run.dir)
    except OSError as e:
        raise exc.UsageError(f"cannot use state directory {run.state_dir}: {e.strerror}") from None


def require_trusted(state_dir: Path) -> None:
    """Refuse (exit 2) a state directory another user could have written (see ``untrusted``)."""
    problem = untrusted(state_dir)
    if problem:
        raise exc.UsageError(problem)


def prepare_state_dir(state_dir: Path) -> None:
    """Make ``state_dir`` ready for a new run, or refuse it (exit 2) before anything starts:
    create it (0700) with a ``.gitignore`` that ignores everything in it, check it is a
    private directory of this user, and that a run directory can be created in it."""
    require_trusted(state_dir)  # before creating anything in it
    try:
        make_private_dir(runs_root(state_dir))
    except OSError as e:
        raise exc.UsageError(f"cannot use state directory {state_dir}: {e.strerror}") from None
    require_trusted(state_dir)  # again: someone else may have created it in the meantime
    try:
        ignore = state_dir / ".gitignore"
        if not ignore.exists():
            write_atomic(ignore, "# zellij-swarm run records\n*\n", mode=0o644)
        check_can_create(runs_root(state_dir))
    except OSError as e:
        raise exc.UsageError(f"cannot use state directory {state_dir}: {e.strerror}") from None


def check_can_create(directory: Path) -> None:
    """Raise the ``OSError`` that creating a file in ``directory`` would raise (read-only,
    not a directory, no permission), by creating and removing a probe. Root passes every
    permission check, so asking ``os.access`` would not tell."""
    probe = directory / f".probe.{os.getpid()}.{time.monotonic_ns()}"
    os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    os.unlink(probe)


def all_runs(state_dir: Path) -> list[RunPaths]:
    """Every run directory, newest first by recorded start time."""
    root = runs_root(state_dir)
    try:
        entries = [root / n for n in os.listdir(root) if not n.startswith(".")]
    except (FileNotFoundError, NotADirectoryError):  # none yet, or the state directory is a file: no runs
        return []
    runs = [RunPaths(p) for p in entries if has_record(p / "run.json")]  # an empty one: see find_run
    return sorted(runs, key=_started_at, reverse=True)


def runs_without_record(state_dir: Path) -> list[RunPaths]:
    """The run directories that hold no run record (``run.json``): a supervisor that is
    starting, or that went before it wrote one (``all_runs`` leaves them out)."""
    root = runs_root(state_dir)
    try:
        entries = [root / n for n in os.listdir(root) if not n.startswith(".")]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [RunPaths(p) for p in entries if p.is_dir() and not p.is_symlink() and not has_record(p / "run.json")]


_STARTED_AT = re.compile(rb'"started_at":(-?[0-9][0-9.eE+-]*)[,}]')


def _started_at(run: RunPaths) -> tuple[float, str]:
    """A run's recorded start, read from the head of its run.json: the record holds every
    task's spec (tens of MB for 100,000 tasks) after the few fields it starts with."""
    try:
        m = _STARTED_AT.search(read_record(run.run_json, 4096))
        if m is not None:
            return float(m.group(1)), run.run_id
        return float(read_json(run.run_json).get("started_at") or 0.0), run.run_id
    except (OSError, ValueError, AttributeError):
        return 0.0, run.run_id


def find_run(state_dir: Path, run_id: str | None, *, found: StateDir | None = None) -> RunPaths:
    """The named run (a unique prefix of its id is enough), or the newest one. ``found``: how
    the state directory was found (``config.state_dir``): finding no run then says where it
    looked, and how to point elsewhere."""
    if run_id is None:
        runs = all_runs(state_dir)
        if not runs:
            raise exc.UsageError(found.no_runs() if found is not None else f"no runs under {state_dir}")
        return runs[0]
    missing = exc.RunNotFound(run_id, str(state_dir), message=found.no_runs(run_id) if found is not None else None)
    if not run_id or "/" in run_id or run_id.startswith("."):  # "" is a prefix of every id, and names none
        raise missing
    exact = RunPaths(runs_root(state_dir) / run_id)
    try:
        named = exact.run_json.is_file()
    except (OSError, ValueError):  # longer than a file name, a NUL in it: no run's id (a task's name?)
        named = False
    if named:
        if not has_record(exact.run_json):
            raise DamagedRecord(f"{exact.run_json}: empty record (the machine stopped as the run started?); "
                                f"run {run_id} cannot be read")
        return exact
    matches = [r for r in all_runs(state_dir) if r.run_id.startswith(run_id)]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise exc.UsageError(f"run id prefix {run_id!r} is ambiguous: {', '.join(r.run_id for r in matches)}")
    raise missing
