"""`dump-layout` (contract §2.13): a session as KDL v1, shaped like Zellij's serializer
(`session_serialization.rs`): a global `cwd` (the common path of the terminal panes' cwds; pane
cwds relative to it), the active tab with `focus=true`, each tab's focused pane with
`focus=true`, splits, stacks (`stacked=true`, `expanded=true`), sizes, command panes with
`start_suspended true`, floating panes with their coordinates. The resurrection record's
`session-layout.kdl` is the same text."""
from __future__ import annotations

import os


def kdl_str(s) -> str:
    out = ['"']
    for ch in str(s):
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20:
            out.append(f"\\u{{{ord(ch):x}}}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def pane_cwd(server, p) -> str:
    """Where a terminal pane's process is: its /proc cwd while it runs, else where it started."""
    if p.proc is not None:
        try:
            return os.readlink(f"/proc/{p.proc.pid}/cwd")
        except OSError:
            pass
    return p.cwd if p.cwd and os.path.isdir(p.cwd) else server.cwd


def layout_kdl(server) -> str:
    terms = [p for t in server.tabs for p in t.panes if p.kind == "terminal" and not p.suppressed]
    cwds = {p: pane_cwd(server, p) for p in terms}
    base = os.path.commonpath(list(cwds.values())) if cwds else None
    lines = ["layout {"]
    if base:
        lines.append(f"    cwd {kdl_str(base)}")
    active = server.active_tab_id()
    for t in server.tabs:
        lines.append(f"    tab name={kdl_str(t.name)}" + (" focus=true" if t.id == active else "")
                     + " {")
        body = []
        root = t.root
        if root is not None and root.kind == "split" and root.direction == "horizontal" \
                and root.size is None:
            for c in root.children:  # the tab itself is the top-to-bottom split
                body.extend(_node(c, t, cwds, base))
        elif root is not None:
            body.extend(_node(root, t, cwds, base))
        floats = [p for p in t.panes if p.floating]
        if floats:
            body.append("floating_panes {")
            for p in floats:
                body.extend("    " + x for x in _pane(p, t, cwds, base))
            body.append("}")
        lines.extend("        " + x for x in body)
        lines.append("    }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _size(size) -> list[str]:
    if size is None:
        return []
    return [f"size={size}" if isinstance(size, int) else f'size="{size}"']


def _node(node, tab, cwds, base, stack=None) -> list[str]:
    if node.kind == "pane":
        extra = ["expanded=true"] if stack is not None and stack.expanded is node.pane else []
        return _pane(node.pane, tab, cwds, base, extra, node.size)
    props = _size(node.size)
    if node.kind == "stack":
        props.insert(0, "stacked=true")
    elif node.direction == "vertical":
        props.insert(0, 'split_direction="vertical"')
    out = ["pane" + "".join(" " + x for x in props) + " {"]
    for c in node.children:
        out.extend("    " + x for x in _node(c, tab, cwds, base,
                                             node if node.kind == "stack" else None))
    out.append("}")
    return out


def _pane(p, tab, cwds, base, extra=(), size=None) -> list[str]:
    q = kdl_str
    props = []
    if p.name is not None:
        props.append(f"name={q(p.name)}")
    if p.kind == "terminal" and p.argv:
        props.append(f"command={q(p.argv[0])}")
    if p in cwds and base:
        rel = os.path.relpath(cwds[p], base)
        if rel != ".":
            props.append(f"cwd={q(rel)}")
    if p is tab.focused:
        props.append("focus=true")
    props.extend(extra)
    if not p.floating:
        props.extend(_size(size))
    if p.borderless:
        props.append("borderless=true")
    body = []
    if p.kind == "terminal" and p.argv:
        if len(p.argv) > 1:
            body.append("    args " + " ".join(q(a) for a in p.argv[1:]))
        body.append("    start_suspended true")
    if p.floating:
        x, y, rows, cols = p.geom
        body += [f"    height {rows}", f"    width {cols}", f"    x {x}", f"    y {y}"]
    if p.kind == "plugin":
        body.append(f"    plugin location={q(p.plugin_url)}")
    head = "pane" + "".join(" " + x for x in props)
    return [head + " {", *body, "}"] if body else [head]

