"""The binding's modules form layers: no import circle, no import hidden in a function to hold
one open.

The static check reads every module of python/devarray (the _jit compiler included) with
ast: the imports a module runs when it is imported (at its top level, in a class body, an
if or a try) give the module graph, which must sort topologically (a circle fails, named);
an import inside a function is allowed only for what is optional or slow and lazily loaded
(Numba, asyncio, the file `cmake --install` writes) or the compiler's own recursion, listed
in LAZY with the reason, and must say why in a comment on its line. The runtime check
imports each module first in a fresh interpreter whose package skips __init__ (which imports
everything), in the layered order, so that each module is shown to stand on its own imports.
"""

import ast
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYROOT = os.path.normpath(os.path.join(HERE, ".."))
PKG = "devarray"

# (module, what it imports inside a function): why that import is not at the top
LAZY = {
    ("devarray", "devarray._jit"): "Numba: optional, loaded on first use of devarray.jit",
    ("devarray", "devarray._jit.stubs"): "Numba: optional, loaded on first use of a kernel name",
    ("devarray.roc", "devarray._jit.stubs"): "Numba: optional, loaded on first use",
    ("devarray.roc", "devarray._jit"): "Numba: optional, loaded on first use",
    ("devarray._lib", "devarray._installed"): "written by `cmake --install` only",
    ("devarray._jit.typingctx", "devarray._jit.dispatcher"):
        "the compiler's recursion: typing a call of an @njit function compiles it",
}
LAZY_EXTERNAL = {"numba", "asyncio"}  # top-level names a function may import lazily


def _modules():
    mods = {}
    base = os.path.join(PYROOT, PKG)
    for dp, dirs, files in os.walk(base):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(dp, f), PYROOT)[:-3].replace(os.sep, ".")
                if rel.endswith(".__init__"):
                    rel = rel[:-len(".__init__")]
                mods[rel] = os.path.join(dp, f)
    return mods


MODS = _modules()


def _targets(mod, node):
    """The package modules an import statement of `mod` imports (with their packages)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            base = mod.split(".")
            if not MODS[mod].endswith("__init__.py"):
                base = base[:-1]
            base = base[:len(base) - (node.level - 1)]
            src = ".".join(base + ([node.module] if node.module else []))
        else:
            src = node.module or ""
        names = [src] + [src + "." + a.name for a in node.names]
    ancestors = {".".join(mod.split(".")[:i]) for i in range(1, mod.count(".") + 1)}
    out = set()
    for n in names:
        if n == PKG or n.startswith(PKG + "."):
            parts = n.split(".")
            for i in range(1, len(parts) + 1):  # a.b.c imports a.b (its __init__) first
                m = ".".join(parts[:i])
                if m in MODS and m not in ancestors:  # (a package being imported already)
                    out.add(m)
    return out


def _scan(mod):
    """(imports run at import time, [(line, target, source line) inside functions],
    [(line, external name, source line) inside functions])."""
    src = open(MODS[mod]).read()
    lines = src.splitlines()
    top, lazy, lazy_ext = set(), [], []

    def walk(node, in_fn):
        for c in ast.iter_child_nodes(node):
            fn = in_fn or isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(c, (ast.Import, ast.ImportFrom)):
                tg = _targets(mod, c) - {mod}
                if in_fn:
                    lazy.extend((c.lineno, t, lines[c.lineno - 1]) for t in tg)
                    if not tg and not (isinstance(c, ast.ImportFrom) and c.level):
                        name = (c.names[0].name if isinstance(c, ast.Import) else c.module)
                        lazy_ext.append((c.lineno, name, lines[c.lineno - 1]))
                else:
                    top.update(tg)
            walk(c, fn)

    walk(ast.parse(src), False)
    return top, lazy, lazy_ext


SCANS = {m: _scan(m) for m in MODS}


def _tsort(graph):
    """The modules bottom first; raises AssertionError naming a circle."""
    order, state = [], {}

    def visit(m, path):
        if state.get(m) == "done":
            return
        if state.get(m) == "open":
            raise AssertionError("import circle: " + " -> ".join(path[path.index(m):] + [m]))
        state[m] = "open"
        for d in sorted(graph[m]):
            visit(d, path + [m])
        state[m] = "done"
        order.append(m)

    for m in sorted(graph):
        visit(m, [])
    return order


def layered_order():
    return _tsort({m: SCANS[m][0] for m in MODS})


def test_module_imports_form_layers():
    order = layered_order()
    assert set(order) == set(MODS)


def test_no_import_hidden_in_a_function():
    bad = []
    for m in sorted(MODS):
        _, lazy, lazy_ext = SCANS[m]
        for line, target, text in lazy:
            if (m, target) not in LAZY:
                bad.append("%s:%d imports %s inside a function" % (m, line, target))
            elif "#" not in text:
                bad.append("%s:%d: say why (a comment on the line)" % (m, line))
        for line, name, text in lazy_ext:
            if name.split(".")[0] not in LAZY_EXTERNAL:
                bad.append("%s:%d imports %s inside a function" % (m, line, name))
            elif "#" not in text:
                bad.append("%s:%d: say why (a comment on the line)" % (m, line))
    assert bad == []


def test_a_planted_circle_is_found():
    """The check itself: a module importing one above it is reported as a circle."""
    graph = {m: set(SCANS[m][0]) for m in MODS}
    graph["devarray._lib"].add("devarray._context")
    with pytest.raises(AssertionError, match=r"import circle: .*devarray\._lib"):
        _tsort(graph)
    src = "def f():\n    from ._context import current_context\n"
    tree = ast.parse(src)
    node = tree.body[0].body[0]
    assert _targets("devarray._stream", node) == {"devarray._context"}


def test_a_planted_hidden_import_is_found(tmp_path, monkeypatch):
    p = tmp_path / "_stream.py"
    p.write_text(open(MODS["devarray._stream"]).read()
                 + "\n\ndef _late():\n    from ._context import current_context\n")
    monkeypatch.setitem(MODS, "devarray._stream", str(p))
    _, lazy, _ = _scan("devarray._stream")
    assert any(t == "devarray._context" for _, t, _ in lazy)


def _imports_package(mod):
    """Whether `mod` imports the package itself (import devarray, from devarray import x)."""
    for node in ast.walk(ast.parse(open(MODS[mod]).read())):
        if isinstance(node, ast.Import) and any(a.name == PKG for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and not node.level and node.module == PKG:
            return True
    return False


_RUNNER = r"""
import importlib, os, sys, types
root, name = sys.argv[1], sys.argv[2]
pkg = types.ModuleType("devarray")  # the package without its __init__ (which imports all)
pkg.__path__ = [os.path.join(root, "devarray")]
sys.modules["devarray"] = pkg
importlib.import_module(name)
print("ok")
"""


def test_each_module_imports_alone_in_layered_order():
    """Bottom first: each module, in a fresh interpreter, with nothing else of the package
    imported before it (the _jit compiler, which needs Numba, is left to the static check)."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    failed = []
    for m in layered_order():
        if m == PKG or m.startswith(PKG + "._jit") or _imports_package(m):
            continue  # (a module importing the package itself needs its __init__)
        r = subprocess.run([sys.executable, "-c", _RUNNER, PYROOT, m], env=env,
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0 or "ok" not in r.stdout:
            failed.append("%s: %s" % (m, (r.stderr.strip().splitlines() or ["?"])[-1]))
    assert failed == []
