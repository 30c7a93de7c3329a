"""Tiled geometry of one tab: a tree of splits, stacks and panes (contract §3.10, §4.3).

A tab's tiled panes form a tree like the layout that made them: ``split`` nodes (children top
to bottom for ``horizontal``, side by side for ``vertical``), ``stack`` nodes (panes on top of
each other: one expanded, the others one row each) and ``pane`` leaves. Sizes are the layout's
(``int`` = fixed cells, ``"N%"``, ``None`` = an even share of what is left). This is not
Zellij's real geometry engine (§5.8); it is enough to see where a pane went and whether a pane
was collapsed into a stack.
"""
from __future__ import annotations


class Node:
    __slots__ = ("children", "direction", "expanded", "kind", "pane", "parent", "size")

    def __init__(self, kind, *, direction="horizontal", size=None, children=(), pane=None):
        self.kind = kind  # "split" | "stack" | "pane"
        self.direction = direction
        self.size = size
        self.children: list[Node] = []
        self.pane = pane
        self.expanded = None  # the expanded member (a pane) of a stack
        self.parent: Node | None = None
        for c in children:
            self.adopt(c)

    def adopt(self, child, index=None):
        child.parent = self
        if index is None:
            self.children.append(child)
        else:
            self.children.insert(index, child)


def leaf(pane, size=None) -> Node:
    return Node("pane", size=size, pane=pane)


def from_spec(spec, panes) -> Node | None:
    """A tree from a layout/record spec whose leaves are indices into ``panes``
    (``None`` entries, e.g. floating panes, are skipped)."""
    if spec is None:
        return None
    if "leaf" in spec:
        p = panes[spec["leaf"]]
        return None if p is None else leaf(p, spec.get("size"))
    kids = [n for n in (from_spec(c, panes) for c in spec.get("children", [])) if n is not None]
    if "stack" in spec:
        node = Node("stack", size=spec.get("size"), children=kids)
        exp = spec.get("expanded")
        node.expanded = panes[exp] if exp is not None else (kids[0].pane if kids else None)
        return node if kids else None
    return Node("split", direction=spec.get("split", "horizontal"), size=spec.get("size"),
                children=kids)


def to_spec(node, index) -> dict:
    """The inverse of ``from_spec``; ``index(pane)`` gives a leaf's index."""
    if node.kind == "pane":
        return {"leaf": index(node.pane), "size": node.size}
    kids = [to_spec(c, index) for c in node.children]
    if node.kind == "stack":
        return {"stack": True, "size": node.size, "children": kids,
                "expanded": index(node.expanded) if node.expanded is not None else None}
    return {"split": node.direction, "size": node.size, "children": kids}


def leaves(node):
    if node is None:
        return
    if node.kind == "pane":
        yield node
        return
    for c in node.children:
        yield from leaves(c)


def find(root, pane) -> Node | None:
    return next((n for n in leaves(root) if n.pane is pane), None)


def in_stack(root, pane) -> bool:
    n = find(root, pane)
    return n is not None and n.parent is not None and n.parent.kind == "stack"


# ---------------------------------------------------------------------------- geometry

def _share(children, total):
    """Cells along the split axis for each child: fixed, then percent, then even shares."""
    sizes = [None] * len(children)
    left = total
    for i, c in enumerate(children):
        if isinstance(c.size, int) and not isinstance(c.size, bool):
            sizes[i] = min(c.size, max(0, left))
            left -= sizes[i]
    pct_base = left
    for i, c in enumerate(children):
        if isinstance(c.size, str) and c.size.endswith("%"):
            sizes[i] = min(max(1, pct_base * int(c.size[:-1]) // 100), max(0, left))
            left -= sizes[i]
    flex = [i for i, s in enumerate(sizes) if s is None]
    if flex:
        each, extra = divmod(max(0, left), len(flex))
        for k, i in enumerate(flex):
            sizes[i] = each + (1 if k < extra else 0)
    elif children and left > 0:
        sizes[-1] += left  # nothing flexible: the last child takes the rest
    return [max(1, s) for s in sizes]


def place(node, x, y, rows, cols) -> None:
    """Sets ``pane.geom = (x, y, rows, cols)`` for every leaf under ``node``."""
    if node is None:
        return
    if node.kind == "pane":
        node.pane.geom = (x, y, max(1, rows), max(1, cols))
        return
    if node.kind == "stack":
        n = len(node.children)
        exp = node.expanded if any(c.pane is node.expanded for c in node.children) else None
        if exp is None and node.children:
            exp = node.children[0].pane
            node.expanded = exp
        for c in node.children:
            h = max(1, rows - (n - 1)) if c.pane is exp else 1
            c.pane.geom = (x, y, h, max(1, cols))
            y += h
        return
    if not node.children:
        return
    vertical = node.direction.lower() == "vertical"
    for c, size in zip(node.children, _share(node.children, cols if vertical else rows), strict=True):
        if vertical:
            place(c, x, y, rows, size)
            x += size
        else:
            place(c, x, y, size, cols)
            y += size


# ---------------------------------------------------------------------------- mutation

def _replace(root, old, new) -> Node:
    """Puts ``new`` where ``old`` was (``new`` takes ``old``'s size); returns the new root."""
    new.size, old.size = old.size, None
    parent = old.parent
    if parent is None:
        new.parent = None
        return new
    i = parent.children.index(old)
    parent.children[i] = new
    new.parent = parent
    return root


def stack_onto(root, target, pane, expand: bool) -> Node:
    """``pane`` joins the stack ``target`` is in, or ``target`` becomes a stack of two.
    Returns the new root."""
    node = find(root, target)
    new = leaf(pane)
    if node.parent is not None and node.parent.kind == "stack":
        stack = node.parent
        stack.adopt(new, stack.children.index(node) + 1)
    else:
        stack = Node("stack")
        root = _replace(root, node, stack)
        stack.adopt(node)
        stack.adopt(new)
        stack.expanded = target
    if expand:
        stack.expanded = pane
    return root


def split(root, target, pane, direction) -> Node:
    """Splits ``target``'s cell: ``direction`` is right/left/down/up. Returns the new root."""
    node = find(root, target)
    if node.parent is not None and node.parent.kind == "stack":
        node = node.parent  # a stack is split as a whole
    vertical = direction in ("right", "left")
    box = Node("split", direction="vertical" if vertical else "horizontal")
    root = _replace(root, node, box)
    new = leaf(pane)
    first, second = (new, node) if direction in ("left", "up") else (node, new)
    box.adopt(first)
    box.adopt(second)
    return root


def add(root, pane) -> Node:
    """A new tiled pane in the biggest spot (§3.10; not Zellij's exact choice): the largest
    flexible cell (a stack counts as one) is split along its longer side."""
    if root is None:
        return leaf(pane)
    cells = []
    for n in leaves(root):
        cell = n.parent if n.parent is not None and n.parent.kind == "stack" else n
        if cell in cells or (isinstance(cell.size, int) and n.pane.kind == "plugin"):
            continue
        if n.pane.kind == "plugin" and not n.pane.selectable:
            continue
        cells.append(cell)
    if not cells:
        # only bars: the new pane goes before the last bar (never after a status bar)
        box = root if root.kind == "split" and root.direction == "horizontal" else None
        if box is None:
            box = Node("split")
            box.adopt(root)
            root = box
        bars = [i for i, c in enumerate(box.children) if isinstance(c.size, int)]
        box.adopt(leaf(pane), bars[-1] if len(bars) > 1 else len(box.children))
        return root

    def area(cell):
        ns = list(leaves(cell))
        xs = [n.pane.geom for n in ns]
        rows = sum(g[2] for g in xs) if cell.kind == "stack" else xs[0][2]
        return rows * xs[0][3]

    best = max(cells, key=area)
    anchor = next(leaves(best)).pane
    _, _, rows, cols = anchor.geom
    if best.kind == "stack":
        rows = sum(n.pane.geom[2] for n in leaves(best))
    return split(root, anchor, pane, "right" if cols > 2 * rows else "down")


def replace_pane(root, old, new) -> None:
    """``new`` takes ``old``'s cell (in-place panes, §2.7)."""
    node = find(root, old)
    if node is not None:
        node.pane = new
        if node.parent is not None and node.parent.expanded is old:
            node.parent.expanded = new


def remove(root, pane):
    """Takes ``pane`` out; returns ``(new root, neighbour)`` — the pane nearest to where it was
    (the next stack member, else a pane of the sibling cell), ``None`` when none is left."""
    node = find(root, pane)
    if node is None:
        return root, None
    parent = node.parent
    if parent is None:
        return None, None
    i = parent.children.index(node)
    parent.children.remove(node)
    sib = parent.children[min(i, len(parent.children) - 1)] if parent.children else None
    neighbour = next(leaves(sib)).pane if sib is not None else None
    if parent.kind == "stack" and parent.expanded is pane:
        parent.expanded = neighbour
    if len(parent.children) == 1:
        only = parent.children[0]
        root = _replace(root, parent, only)
    elif not parent.children:
        return remove_node(root, parent), neighbour
    return root, neighbour


def remove_node(root, node):
    parent = node.parent
    if parent is None:
        return None
    parent.children.remove(node)
    if len(parent.children) == 1:
        only = parent.children[0]
        root = _replace(root, parent, only)
    return root
