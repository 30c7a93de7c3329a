"""Layout (KDL v1) parsing for the fake zellij: `ckdl.parse(text, version=1)` + the §4.3 rules.

Result shape (JSON-serialisable, sent to the server):
    {"explicit_tabs": bool, "tabs": [{"name", "focus", "panes": [leaf...], "floating": [leaf...],
                                      "tree": node}]}
node = {"leaf": index into panes, "size"} | {"split": "horizontal"|"vertical", "size",
        "children": [node...]} | {"stack": true, "size", "children": [leaf node...], "expanded"}
leaf = {"name", "argv" (list|None), "cwd", "close_on_exit", "start_suspended", "focus",
        "plugin_url", "borderless", "stacked", "expanded", "floating", "x", "y", "width", "height"}
"""
from __future__ import annotations

import os
import re
from types import SimpleNamespace

PANE_PROPS = {
    "name", "focus", "size", "split_direction", "borderless", "command", "args", "cwd", "edit",
    "close_on_exit", "start_suspended", "stacked", "expanded", "exclude_from_sync",
    "contents_file", "default_fg", "default_bg",
}
FLOATING_PROPS = {"x", "y", "width", "height", "pinned"}
TAB_PROPS = {"name", "focus", "cwd", "split_direction", "hide_floating_panes",
             "max_panes", "min_panes", "exact_panes"}
LAYOUT_CHILDREN = {"tab", "pane", "pane_template", "tab_template", "default_tab_template",
                   "new_tab_template", "swap_tiled_layout", "swap_floating_layout",
                   "floating_panes", "cwd"}
RESERVED = LAYOUT_CHILDREN | {"children", "plugin", "args"}
BOOL_PROPS = {"focus", "borderless", "close_on_exit", "start_suspended", "stacked", "expanded",
              "exclude_from_sync", "pinned", "hide_floating_panes"}
STR_PROPS = {"name", "command", "cwd", "edit", "contents_file", "default_fg", "default_bg",
             "split_direction"}
PLUGIN_ALIASES = {"tab-bar", "status-bar", "compact-bar", "strider", "session-manager"}
NON_SELECTABLE = {"zellij:tab-bar", "zellij:status-bar", "zellij:compact-bar"}

BUILTIN = {
    "default": """layout {
    pane size=1 borderless=true {
        plugin location="zellij:tab-bar";
    }
    pane;
    pane size=2 borderless=true {
        plugin location="zellij:status-bar";
    }
}
""",
    "compact": """layout {
    pane;
    pane size=1 borderless=true {
        plugin location="zellij:compact-bar";
    }
}
""",
}


class LayoutError(Exception):
    pass


def report(message: str, path: str | None) -> str:
    """A miette-like report, as Zellij prints layout errors (text is not byte-exact)."""
    where = path or "<layout-string>"
    return (
        "Error: \n  \u00d7 Failed to parse Zellij configuration\n"
        f"   \u256d\u2500[{where}]\n"
        f"   \u2570\u2500\u2500 {message}\n"
    )


def load_layout_file(spec: str, caller_cwd: str, env) -> tuple[str, str]:
    """Returns (path, text). A bare name (no '/' and no extension) is a layout-dir name."""
    if "/" not in spec and "." not in spec:
        if spec in BUILTIN:
            return (spec, BUILTIN[spec])
        layout_dir = os.path.join(env.get("ZELLIJ_CONFIG_DIR") or os.path.join(
            env.get("HOME", "/"), ".config", "zellij"), "layouts")
        cand = os.path.join(layout_dir, spec + ".kdl")
        if os.path.isfile(cand):
            with open(cand, encoding="utf-8") as fh:
                return (cand, fh.read())
        raise FileNotFoundError(f"layout {spec!r} not found in layout dir {layout_dir}")
    path = spec if os.path.isabs(spec) else os.path.join(caller_cwd, spec)
    with open(path, encoding="utf-8") as fh:
        return (path, fh.read())


_VAR = re.compile(r"\$(\w+)|\$\{(\w+)\}")


def expand(value: str, env) -> str:
    if value.startswith("~"):
        home = env.get("HOME", "")
        if value == "~" or value.startswith("~/"):
            value = home + value[1:]

    def sub(m):
        name = m.group(1) or m.group(2)
        if name not in env:
            raise LayoutError(f"Failed to expand variable ${name}: environment variable not found")
        return env[name]

    return _VAR.sub(sub, value)


def join_cwd(base: str | None, rel: str | None) -> str | None:
    if rel is None:
        return base
    if base is None or os.path.isabs(rel):
        return rel
    return os.path.join(base, rel)


class Parser:
    def __init__(self, env, version, caller_cwd):
        self.env = env
        self.version = version
        self.caller_cwd = caller_cwd
        self.pane_templates: dict = {}
        self.tab_templates: dict = {}
        self.default_tab_template = None

    # ---------------------------------------------------------------- helpers
    def node_props(self, node, allowed: set, kind: str) -> dict:
        """Properties from `k=v` and from child nodes `k v` (except panes/templates)."""
        props = {}
        for k, v in node.properties.items():
            if k not in allowed:
                raise LayoutError(f"Unknown {kind} property: {k}")
            props[k] = v
        for child in node.children:
            if child.name in allowed and child.name != "args":
                if not child.args:
                    raise LayoutError(f"{kind} property '{child.name}' needs a value")
                props[child.name] = child.args[0]
        for k, v in props.items():
            if k in BOOL_PROPS and not isinstance(v, bool):
                raise LayoutError(f"{kind} property '{k}' must be a boolean (true/false)")
            if k in STR_PROPS and not isinstance(v, str):
                raise LayoutError(f"{kind} property '{k}' must be a quoted string")
        if "split_direction" in props and props["split_direction"] not in (
                "vertical", "horizontal", "Vertical", "Horizontal"):
            raise LayoutError(
                f"Invalid split direction: {props['split_direction']}, "
                "should be either \"vertical\" or \"horizontal\"")
        if "size" in props:
            v = props["size"]
            ok = False
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                ok = True
            elif isinstance(v, str):
                m = re.fullmatch(r"(\d+)%", v)
                ok = bool(m) and 1 <= int(m.group(1)) <= 100
            if not ok:
                raise LayoutError(
                    "size should be a fixed number (eg. 1) or a quoted percent (eg. \"50%\")")
        return props

    def is_pane_node(self, name: str) -> bool:
        return name == "pane" or name in self.pane_templates

    # ---------------------------------------------------------------- panes
    def pane(self, node, inherited_cwd, floating=False, in_stack=False, children_slot=None,
             template=None):
        """Returns a list of leaf panes for `node` (a pane or a pane template instance)."""
        allowed = PANE_PROPS | (FLOATING_PROPS if floating else set())
        if node.name in self.pane_templates and template is None:
            return self.pane(node, inherited_cwd, floating, in_stack, children_slot,
                             template=self.pane_templates[node.name])
        props = {}
        base_children = []
        base_args = None
        plugin = None
        if template is not None:
            props.update(template["props"])
            base_children = template["children"]
            base_args = template["args"]
            plugin = template["plugin"]
        props.update(self.node_props(node, allowed, "pane"))
        args = None
        sub_nodes = []
        for child in node.children:
            if child.name == "args":
                if not child.args:
                    raise LayoutError("args need at least one value")
                args = [str(a) if not isinstance(a, str) else a for a in child.args]
            elif child.name == "plugin":
                plugin = child.properties.get("location") or (child.args[0] if child.args else None)
                if plugin is None:
                    raise LayoutError("plugin needs a location")
            elif child.name == "children" or self.is_pane_node(child.name):
                sub_nodes.append(child)
            elif child.name in allowed:
                continue
            else:
                raise LayoutError(f"Unknown pane property: {child.name}")
        if base_args is not None and args is not None:
            args = base_args + args
        elif args is None:
            args = base_args
        if template is not None and base_children:
            # template children; instance child panes fill the template's `children` slot
            merged = []
            for c in base_children:
                merged.append(c)
            inst = [c for c in sub_nodes if c.name != "children"]
            sub_nodes = merged
            children_slot = inst if inst else children_slot
        has_children = bool(sub_nodes)
        command = props.get("command")
        if (args is not None or "close_on_exit" in props or "start_suspended" in props) \
                and command is None:
            bad = "args" if args is not None else (
                "close_on_exit" if "close_on_exit" in props else "start_suspended")
            raise LayoutError(
                f"{bad} can only be specified if a command was specified either in the "
                "pane_template or in the pane")
        if has_children:
            for bad in ("command", "edit", "cwd", "borderless"):
                if bad in props and not (bad == "cwd" and template is not None):
                    raise LayoutError(
                        f"Cannot have both properties ({bad}) and nested children")
            if plugin is not None:
                raise LayoutError("Cannot have both properties (plugin) and nested children")
        stacked = bool(props.get("stacked"))
        if stacked:
            if not has_children:
                raise LayoutError("A stacked pane must have children")
            if str(props.get("split_direction", "")).lower() == "vertical":
                raise LayoutError("Stacked panes cannot be vertical")
        if "expanded" in props and not in_stack:
            raise LayoutError("expanded can only be used inside a stacked pane")
        cwd = inherited_cwd
        if "cwd" in props:
            cwd = join_cwd(inherited_cwd, expand(props["cwd"], self.env))
        if has_children:
            kids = []
            for sub in sub_nodes:
                if sub.name == "children":
                    for inst in children_slot or []:
                        kids.extend(self.pane(inst, cwd, floating, stacked))
                    continue
                if stacked and any(self.is_pane_node(c.name) for c in sub.children):
                    raise LayoutError("Stacked panes cannot have children")
                kids.extend(self.pane(sub, cwd, floating, stacked, children_slot))
            if floating:
                return kids
            if stacked:
                exp = next((k["leaf"] for k in kids if k["leaf"]["expanded"]), None)
                return [{"stack": True, "size": props.get("size"), "children": kids,
                         "expanded": exp}]
            return [{"split": str(props.get("split_direction", "horizontal")).lower(),
                     "size": props.get("size"), "children": kids}]
        argv = None
        if command is not None:
            argv = [expand(command, self.env), *(args or [])]
        if "edit" in props:
            editor = self.env.get("EDITOR") or self.env.get("VISUAL") or "vi"
            argv = [editor, expand(props["edit"], self.env)]
        if plugin is not None and plugin in PLUGIN_ALIASES:
            plugin = "zellij:" + plugin
        leaf = {
            "name": props.get("name"),
            "argv": argv,
            "cwd": cwd,
            "close_on_exit": bool(props.get("close_on_exit", False)),
            "start_suspended": bool(props.get("start_suspended", False)),
            "focus": bool(props.get("focus", False)),
            "plugin_url": plugin,
            "borderless": bool(props.get("borderless", False)),
            "stacked": in_stack,
            "expanded": bool(props.get("expanded", False)),
            "floating": floating,
            "size": props.get("size"),
        }
        if floating:
            for k in ("x", "y", "width", "height"):
                leaf[k] = props.get(k)
        return [{"leaf": leaf, "size": leaf["size"]}]

    def template(self, node) -> dict:
        props = {}
        for k, v in node.properties.items():
            if k == "name":
                continue
            if k not in PANE_PROPS:
                raise LayoutError(f"Unknown pane property: {k}")
            props[k] = v
        args = None
        plugin = None
        children = []
        for child in node.children:
            if child.name == "args":
                args = list(child.args)
            elif child.name == "plugin":
                plugin = child.properties.get("location")
            elif child.name == "children" or self.is_pane_node(child.name):
                children.append(child)
            elif child.name in PANE_PROPS:
                props[child.name] = child.args[0] if child.args else None
            else:
                raise LayoutError(f"Unknown pane property: {child.name}")
        return {"props": props, "args": args, "plugin": plugin, "children": children}

    # ---------------------------------------------------------------- tabs
    def tab(self, node, global_cwd, template=None):
        props = self.node_props(node, TAB_PROPS, "tab")
        cwd = join_cwd(global_cwd, expand(props["cwd"], self.env)) if "cwd" in props else global_cwd
        body = [c for c in node.children if c.name not in TAB_PROPS]
        tiled_nodes = []
        floating_nodes = []
        for c in body:
            if c.name == "floating_panes":
                floating_nodes.extend(c.children)
            elif self.is_pane_node(c.name) or c.name == "children":
                tiled_nodes.append(c)
            else:
                raise LayoutError(f"Invalid tab property: {c.name}")
        wrapper = template if template is not None else self.default_tab_template
        if wrapper is not None:
            nodes = []
            for c in wrapper:
                if c.name == "children":
                    nodes.extend(tiled_nodes)
                else:
                    nodes.append(c)
            tiled_nodes = nodes
        nodes = []
        for c in tiled_nodes:
            if c.name == "floating_panes":
                floating_nodes.extend(c.children)
                continue
            nodes.extend(self.pane(c, cwd))
        panes: list = []
        tree = _index({"split": str(props.get("split_direction", "horizontal")).lower(),
                       "size": None, "children": nodes}, panes)
        floating = []
        for c in floating_nodes:
            floating.extend(n["leaf"] for n in self.pane(c, cwd, floating=True))
        return {"name": props.get("name"), "focus": bool(props.get("focus", False)),
                "panes": panes, "floating": floating, "tree": tree}

    def layout(self, doc):
        roots = list(doc.nodes)
        layouts = [n for n in roots if n.name == "layout"]
        for n in roots:
            if n.name != "layout":
                if n.name in RESERVED:
                    raise LayoutError('This node should be inside the main "layout" node')
                raise LayoutError(f"Unknown root node: {n.name}")
        if len(layouts) != 1:
            raise LayoutError("A layout file must have exactly one root \"layout\" node")
        root = layouts[0]
        global_cwd = None
        if "cwd" in root.properties:
            global_cwd = expand(root.properties["cwd"], self.env)
        tab_props = {}
        for k, v in root.properties.items():
            if k == "cwd":
                continue
            if k in ("name", "split_direction", "hide_floating_panes") and \
                    self.version >= (0, 44, 1):
                tab_props[k] = v
                continue
            raise LayoutError(f"Unknown layout property: {k}")
        tabs_nodes, pane_nodes, floating_nodes = [], [], []
        # first pass: templates
        for c in root.children:
            if c.name == "pane_template":
                name = c.properties.get("name")
                if not name:
                    raise LayoutError("pane_template must have a name")
                self.pane_templates[name] = self.template(c)
            elif c.name == "tab_template":
                name = c.properties.get("name")
                if not name:
                    raise LayoutError("tab_template must have a name")
                self.tab_templates[name] = list(c.children)
            elif c.name == "default_tab_template":
                self.default_tab_template = list(c.children)
        for c in root.children:
            n = c.name
            if n in ("pane_template", "tab_template", "default_tab_template",
                     "new_tab_template", "swap_tiled_layout", "swap_floating_layout"):
                continue
            if n == "cwd":
                global_cwd = expand(c.args[0], self.env) if c.args else global_cwd
            elif n in ("name", "split_direction", "hide_floating_panes") and \
                    self.version >= (0, 44, 1):
                tab_props[n] = c.args[0] if c.args else None
            elif n == "tab" or n in self.tab_templates:
                tabs_nodes.append(c)
            elif self.is_pane_node(n):
                pane_nodes.append(c)
            elif n == "floating_panes":
                floating_nodes.append(c)
            else:
                raise LayoutError(f"Unknown layout node: {n}")
        if tabs_nodes and pane_nodes:
            raise LayoutError("Cannot have both tabs and panes in the same node")
        if tabs_nodes and tab_props:
            raise LayoutError(
                "Cannot have tab properties on the layout node when explicit tabs exist")
        if tabs_nodes:
            tabs = []
            for t in tabs_nodes:
                tmpl = self.tab_templates.get(t.name) if t.name != "tab" else None
                tabs.append(self.tab(t, global_cwd, tmpl))
            if sum(1 for t in tabs if t["focus"]) > 1:
                raise LayoutError("Only one tab can be focused")
            if floating_nodes:
                for t in tabs:
                    for fn in floating_nodes:
                        for c in fn.children:
                            t["floating"].extend(
                                n["leaf"] for n in self.pane(c, global_cwd, floating=True))
            explicit = True
        else:
            implicit_tab = SimpleNamespace(name="tab", properties={}, children=pane_nodes + floating_nodes)
            tabs = [self.tab(implicit_tab, global_cwd)]
            tabs[0]["name"] = tab_props.get("name")
            explicit = False
        for t in tabs:
            for p in t["panes"] + t["floating"]:
                if p["cwd"] is not None and not os.path.isabs(p["cwd"]):
                    p["cwd"] = os.path.join(self.caller_cwd, p["cwd"])
        return {"explicit_tabs": explicit, "tabs": tabs, "cwd": global_cwd}


def _index(node: dict, panes: list) -> dict:
    """Replaces leaf dicts by their index in ``panes`` (tree order), appending them there."""
    if "leaf" in node:
        panes.append(node["leaf"])
        return {"leaf": len(panes) - 1, "size": node["size"]}
    out = dict(node)
    out["children"] = [_index(c, panes) for c in node["children"]]
    if "stack" in node:
        exp = node.get("expanded")
        out["expanded"] = next((c["leaf"] for c, k in zip(out["children"], node["children"], strict=True)
                                if exp is not None and k["leaf"] is exp), None)
    return out


def parse_layout(text: str, *, env, version, caller_cwd: str) -> dict:
    import ckdl  # imported lazily: only layout parsing needs it

    try:
        doc = ckdl.parse(text, version=1)
    except Exception as e:  # ckdl.ParseError
        raise LayoutError(f"Failed to parse KDL: {e}") from None
    return Parser(env, version, caller_cwd).layout(doc)
