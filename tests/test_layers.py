"""The import graph follows the layers (docs/spec.md §10.1): a module imports only from its own
layer or the ones below it, and never a private module (``_name``) of another package.

Every import counts — at the top, inside a function, under ``TYPE_CHECKING`` — and there is no
allow-list: a cycle that only type-checking needs is still a cycle a reader has to untangle."""

from __future__ import annotations

import ast
from pathlib import Path

import zellij_swarm

PACKAGE = Path(zellij_swarm.__file__).parent

# Lowest first: the base modules, the packages in order, then the entry points (the command
# line, the Python API and its exceptions). A top-level module in none of these fails the
# test: a new one is given its layer here.
BASE = ("exc", "quoting", "streams", "jsontext", "watch", "external", "calls", "names", "schemas", "pid_end",
        "__package__")
LAYERS = ("config", "records", "worker", "backends", "engine", "render", "commands")
ENTRY_POINTS = ("cli", "api", "errors", "__init__", "__main__")


def layer(unit: str) -> int:
    if unit in ENTRY_POINTS:
        return len(LAYERS) + 1
    if unit in LAYERS:
        return LAYERS.index(unit) + 1
    assert unit in BASE, f"zellij_swarm.{unit} is in no layer: name it in tests/test_layers.py"
    return 0


def imports(path: Path, source: str | None = None) -> list[tuple[int, str]]:
    """(line, dotted name) of everything the module at ``path`` (its text: ``source``, or the
    file's) imports from zellij_swarm, names included: ``from zellij_swarm.backends import
    _cmd`` yields ``zellij_swarm.backends._cmd``."""
    module = path.relative_to(PACKAGE.parent).with_suffix("").parts
    package = module[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text() if source is None else source, str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "zellij_swarm"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[:len(package) - node.level + 1], *([base] if base else [])])
            if base.split(".")[0] == "zellij_swarm":
                found += [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return found


def unit_of(dotted: str) -> str:
    """The layer unit of a module path: ``zellij_swarm.engine.run`` → ``engine``."""
    parts = dotted.split(".")
    if len(parts) < 2:
        return "__init__"
    if not ((PACKAGE / f"{parts[1]}.py").exists() or (PACKAGE / parts[1]).is_dir()):
        # a name the package's __init__ defines (``__version__``): a constant; the API it
        # re-exports is imported only when asked for (its ``__getattr__``)
        return "__package__"
    return parts[1]


def violations_of(path: Path, source: str | None = None) -> list[str]:
    here = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    found = []
    for line, target in imports(path, source):
        where = f"{path.relative_to(PACKAGE.parent)}:{line}"
        origin, dest = unit_of(here), unit_of(target)
        if layer(dest) > layer(origin):
            found.append(f"{where}: {origin} imports {target}, a layer above it")
        private = next((p for p in target.split(".")[2:3] if p.startswith("_") and not p.startswith("__")), None)
        if private is not None and dest != origin:
            found.append(f"{where}: imports {target}, a private module of {dest}")
    return found


def test_no_module_imports_upward_or_another_packages_private_module() -> None:
    assert [v for path in sorted(PACKAGE.rglob("*.py")) for v in violations_of(path)] == []


def test_the_scan_sees_imports_under_type_checking_in_functions_and_relative_ones() -> None:
    """The rule's own check: it would pass vacuously if the scan missed guarded, local or
    relative imports."""
    probe = PACKAGE / "records" / "probe.py"  # a path in the package; never written
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from zellij_swarm.engine import supervisor\n"
              "def f() -> None:\n    from zellij_swarm.backends import _lifecycle\n"
              "from ..render import board\n")
    assert sorted(violations_of(probe, source)) == [
        "zellij_swarm/records/probe.py:3: records imports zellij_swarm.engine.supervisor, a layer above it",
        "zellij_swarm/records/probe.py:5: imports zellij_swarm.backends._lifecycle, a private module of backends",
        "zellij_swarm/records/probe.py:5: records imports zellij_swarm.backends._lifecycle, a layer above it",
        "zellij_swarm/records/probe.py:6: records imports zellij_swarm.render.board, a layer above it",
    ]
