"""What the cluster's nodes have, and the requests none of them can ever grant (SPEC §11.1).

A step asking for more CPUs, memory or generic resources than any node of its partition has, or
for features no node has, would wait in the queue for ever (a queue time is not charged) or be
refused one task at a time. ``preflight`` refuses such a run before it exists, in one line that
names the task and what no node has, from one ``sinfo`` of every node: its partitions, CPUs,
memory, features and GRES as configured (a node that is down now still counts — it may come back).

What cannot be judged from the nodes' facts is left to Slurm: a constraint or GRES written in
a form this reader does not know, an account, a QOS, the ``extra`` options. A doubt never
refuses a run: ``,`` in a constraint is read as the looser OR.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from zellij_swarm import exc, external
from zellij_swarm.config.swarmfile import TaskSpec
from zellij_swarm.exc import BackendError
from zellij_swarm.worker.slurm import Slurm

_FORMAT = "%N|%P|%c|%m|%f|%G"
_UNIT_MB = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
_TOKEN = re.compile(r"\s*(?:(?P<name>[A-Za-z0-9_.-]+)(?:\*\d+)?|(?P<op>[&|,()\[\]]))")


@dataclass(frozen=True)
class Node:
    """One node of the cluster, as configured."""

    name: str
    partitions: frozenset[str]
    cpus: int
    memory_mb: int
    features: frozenset[str]
    gres: Mapping[tuple[str, str | None], int]  # (name, type or None) -> count


def nodes(cluster: Slurm) -> tuple[list[Node], str | None]:
    """Every node of the cluster, and the default partition (None when none is marked)."""
    res = external.run(["sinfo", "--noheader", "--Node", f"--format={_FORMAT}"], timeout=cluster.timeout,
                   env=cluster.env, faults=external.EXECUTOR)
    return parse_sinfo(res.lines)


def parse_sinfo(lines: Iterable[str]) -> tuple[list[Node], str | None]:
    """``sinfo --Node --format=_FORMAT`` lines (a node in several partitions is one line each)."""
    found: dict[str, Node] = {}
    default = None
    for line in lines:
        parts = line.strip().split("|")
        if len(parts) != 6 or not parts[2].isdigit() or not parts[3].isdigit():
            continue
        name, partition, cpus, memory, features, gres = parts
        if partition.endswith("*"):
            partition = default = partition[:-1]
        seen = found.get(name)
        found[name] = Node(name, (seen.partitions if seen else frozenset()) | {partition}, int(cpus), int(memory),
                           frozenset(f for f in features.split(",") if f and f != "(null)"), _node_gres(gres))
    return list(found.values()), default


def _node_gres(text: str) -> dict[tuple[str, str | None], int]:
    """``gpu:a100:2(S:0-1),mps:100`` as counts by (name, type); the untyped total under (name, None)."""
    out: dict[tuple[str, str | None], int] = {}
    for item in re.sub(r"\([^)]*\)", "", text).split(","):
        fields = item.split(":")
        if not fields[0] or fields[0] == "(null)":
            continue
        count = _count(fields[-1]) if len(fields) > 1 else 1
        if count is None:
            continue
        kind = fields[1] if len(fields) == 3 else None
        out[(fields[0], None)] = out.get((fields[0], None), 0) + count
        if kind is not None:
            out[(fields[0], kind)] = out.get((fields[0], kind), 0) + count
    return out


def _count(text: str) -> int | None:
    m = re.fullmatch(r"(\d+)([KMG]?)", text)
    return int(m.group(1)) * {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}[m.group(2)] if m else None


def _memory_mb(mem: str) -> int:
    """``slurm.mem`` (``config.slurm``: digits and an optional unit, megabytes without) in MB."""
    unit = mem[-1] if mem[-1] in _UNIT_MB else "M"
    return math.ceil(int(mem.rstrip("KMGT")) * _UNIT_MB[unit])


def _gres_test(request: str) -> Callable[[Node], bool] | None:
    """Whether a node has every resource of a ``--gres`` request; None for a form not known here."""
    wanted: list[tuple[str, str | None, int]] = []
    for item in request.split(","):
        fields = item.split(":")
        count = _count(fields[-1]) if len(fields) > 1 else 1
        if len(fields) == 2 and count is None:  # name:type
            wanted.append((fields[0], fields[1], 1))
        elif count is not None and len(fields) <= 3:
            wanted.append((fields[0], fields[1] if len(fields) == 3 else None, count))
        else:
            return None
    return lambda node: all(node.gres.get((name, kind), 0) >= count for name, kind, count in wanted)


def _constraint_test(expr: str) -> Callable[[Node], bool] | None:
    """Whether a node's features meet a ``--constraint`` (``&`` and, ``|`` or, brackets and
    parentheses, ``*N`` counts ignored; ``,`` read as or); None for a form not known here."""
    tokens: list[str] = []
    pos = 0
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if m is None:
            return None
        tokens.append(m["op"] or "=" + m["name"])
        pos = m.end()

    def parse(i: int) -> tuple[Callable[[frozenset[str]], bool], int]:
        terms = []
        factors: list[Callable[[frozenset[str]], bool]] = []
        while True:
            if i >= len(tokens):
                raise ValueError(expr)
            tok = tokens[i]
            if tok in ("(", "["):
                inner, i = parse(i + 1)
                if i >= len(tokens) or tokens[i] != {"(": ")", "[": "]"}[tok]:
                    raise ValueError(expr)
                factors.append(inner)
            elif tok.startswith("="):
                factors.append(frozenset({tok[1:]}).issubset)
            else:
                raise ValueError(expr)
            i += 1
            if i < len(tokens) and tokens[i] == "&":
                i += 1
                continue
            terms.append(factors)
            factors = []
            if i < len(tokens) and tokens[i] in ("|", ","):
                i += 1
                continue
            return (lambda have: any(all(f(have) for f in fs) for fs in terms)), i

    try:
        test, end = parse(0)
    except ValueError:
        return None
    return (lambda node: test(node.features)) if end == len(tokens) else None


def shortfall(resources: Mapping[str, Any], candidates: list[Node]) -> str | None:
    """What of ``resources`` no node of ``candidates`` has (alone, or all at once); None when
    some node has it all, or nothing here can be judged."""
    tests: list[tuple[str, Callable[[Node], bool], str]] = []
    if (cpus := resources.get("cpus")) is not None:
        tests.append((f"cpus={cpus}", lambda n: n.cpus >= int(cpus),
                      f"the most a node has: {max((n.cpus for n in candidates), default=0)}"))
    if (mem := resources.get("mem")) is not None:
        tests.append((f"mem={mem}", lambda n: n.memory_mb >= _memory_mb(str(mem)),
                      f"the most a node has: {max((n.memory_mb for n in candidates), default=0)}M"))
    if (gres := resources.get("gres")) is not None and (has_gres := _gres_test(str(gres))) is not None:
        kinds = sorted({f"{k}:{t}" if t else k for k, t in (key for n in candidates for key in n.gres)})
        tests.append((f"gres={gres}", has_gres, f"nodes have: {', '.join(kinds) or 'none'}"))
    if (constraint := resources.get("constraint")) is not None and (
            meets := _constraint_test(str(constraint))) is not None:
        features = sorted({f for n in candidates for f in n.features})
        tests.append((f"constraint={constraint}", meets, f"node features: {', '.join(features) or 'none'}"))
    if not tests or any(all(test(n) for _, test, _ in tests) for n in candidates):
        return None
    alone = [f"{label} ({facts})" for label, test, facts in tests if not any(test(n) for n in candidates)]
    if alone:
        return " and ".join(alone)
    return " and ".join(label for label, _, _ in tests) + " on one node"


def preflight(cluster: Slurm, resources: Mapping[str, Any], tasks: Iterable[TaskSpec], *,
              allocation: int | None = None) -> None:
    """Refuse (``exc.UsageError``, one line) a run one of whose tasks asks for what no node of
    its partition(s) has, checked once per distinct request — or whose allocation (``--slurm-alloc``,
    ``submit``'s job: ``allocation`` tasks at once, each with ``resources``) asks for more CPUs
    than its partition has in all, which Slurm leaves queued for ever (``PartitionConfig``)."""
    try:
        all_nodes, default = nodes(cluster)
    except BackendError as e:
        raise exc.UsageError(f"--executor slurm: cannot read the cluster's nodes: {e}") from None
    if not all_nodes:
        return
    if allocation is not None and (problem := _allocation_shortfall(resources, allocation, all_nodes, default)):
        raise exc.UsageError(f"--executor slurm: {problem}")
    verdicts: dict[tuple[tuple[str, str], ...], str | None] = {}
    refused: list[tuple[str, str]] = []
    tasks = list(tasks)
    for task in tasks:
        wanted = {**resources, **task.slurm}
        key = tuple(sorted((k, str(v)) for k, v in wanted.items()))
        if key not in verdicts:
            verdicts[key] = _verdict(wanted, all_nodes, default)
        if (problem := verdicts[key]) is not None:
            refused.append((task.name, problem))
    if refused:
        name, problem = refused[0]
        who = (f"every task ({len(tasks)})" if len(refused) == len(tasks) > 1 else
               f"task {name!r}" + (f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""))
        raise exc.UsageError(f"--executor slurm: {who} asks for {problem}")


def _verdict(wanted: Mapping[str, Any], all_nodes: list[Node], default: str | None) -> str | None:
    candidates, where = _candidates(wanted, all_nodes, default)
    problem = shortfall(wanted, candidates)
    return None if problem is None else f"{problem}: no node of {where} has it"


def _allocation_shortfall(resources: Mapping[str, Any], tasks: int, all_nodes: list[Node],
                          default: str | None) -> str | None:
    """Why an allocation of ``tasks`` tasks of ``resources`` can never be granted: more CPUs
    than the nodes of its partition have in all (a node down now counts: it may come back);
    None when they have enough."""
    candidates, where = _candidates(resources, all_nodes, default)
    per_task = int(resources.get("cpus") or 1)
    total = sum(n.cpus for n in candidates)
    if not candidates or tasks * per_task <= total or per_task > total:  # (the last: the tasks' own check says)
        return None
    return (f"the swarm's allocation asks for {tasks * per_task} CPUs ({tasks} tasks at once × cpus={per_task}); "
            f"the nodes of {where} have {total} in all: -j {total // per_task} at most")


def _candidates(wanted: Mapping[str, Any], all_nodes: list[Node], default: str | None) -> tuple[list[Node], str]:
    """The nodes a request may run on (its partitions', else the default partition's), and
    where that is, in words."""
    partitions = str(wanted["partition"]).split(",") if wanted.get("partition") else [default] if default else []
    candidates = [n for n in all_nodes if not partitions or n.partitions & set(partitions)]
    return candidates, f"partition {', '.join(partitions)}" if partitions else "the cluster"
