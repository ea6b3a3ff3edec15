"""Structural acceptance lines of issue #14, checked on the source with ``ast`` (no imports).

- No import cycle among torchclad's modules, nor among ``benchmarks/*.py`` (which import each
  other as top-level modules: ``import benchlib``). Every import statement counts, wherever it
  is: inside functions, under ``if TYPE_CHECKING:``, and ``importlib.import_module("literal")``.
  ``from pkg import sub`` depends on ``pkg.sub`` when that is a module, else on ``pkg``. The
  implicit import of a module's parent packages is not counted (every module would otherwise
  depend on ``torchclad/__init__``); dynamic names (``import_module(f"...")``) cannot be seen.
- No torchclad module uses another torchclad module's underscore names: neither
  ``from torchclad.x import _y`` (relative imports too) nor ``x._y`` / ``getattr(x, "_y")`` where
  ``x`` is bound to an imported torchclad module, nor ``obj._y`` where ``_y`` is an attribute
  that only other torchclad modules define (``self._y = ...``, a class-level ``_y``, a method
  ``_y``): a heuristic for reading the privates of another module's objects. Dunder names are
  public. The compiled extensions ``torchclad._C`` / ``torchclad._C_<isa>`` are module names
  fixed by the build, not private API, and are exempt; any other underscore-named module
  counts as a private name of its package.
- No file in torchclad/ over 500 lines; no function over 80 lines unless its docstring has a
  sentence saying why, which by convention contains the word "long" (as in "Long because it is
  one table of cases.";  "long double" / "long long" / "long int" / "unsigned long" do not
  count).
- No ``RawStmt(...)`` constructed in torchclad/engine/reverse/ (the reverse pass builds IR).

Each checker takes the root to scan and returns the offenders as ``path:line: what`` lines; the
self-tests at the end plant each violation in a temporary tree and require that it is caught.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "torchclad"
BENCHMARKS = REPO / "benchmarks"

MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80
EXTENSION_MODULE = re.compile(r"^_C(_\w+)?$")   # torchclad._C, torchclad._C_avx2, ...
SAYS_LONG = re.compile(r"\blong\b(?!\s+(?:double|long|int)\b)", re.I)
UNSIGNED_LONG = re.compile(r"\bunsigned\s+long\b", re.I)


# ---- loading modules


@dataclass
class Module:
    name: str                   # dotted: torchclad.engine.ir, or benchlib for a flat directory
    path: Path
    is_pkg: bool
    tree: ast.Module = field(repr=False)


def load_package(root: Path) -> dict[str, Module]:
    """Every .py file under the package directory ``root``, named from ``root.name``."""
    mods = {}
    for p in sorted(root.rglob("*.py")):
        parts = list(p.relative_to(root.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts.pop()
        mods[".".join(parts)] = Module(".".join(parts), p, is_pkg, ast.parse(p.read_text(), str(p)))
    return mods


def load_flat(root: Path) -> dict[str, Module]:
    """The .py files directly in ``root``, as top-level modules (benchmarks/)."""
    return {p.stem: Module(p.stem, p, False, ast.parse(p.read_text(), str(p)))
            for p in sorted(root.glob("*.py"))}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_extension(mods: dict[str, Module], name: str) -> bool:
    """``name`` is a compiled extension module of a package in ``mods``."""
    parent, _, last = name.rpartition(".")
    return parent in mods and mods[parent].is_pkg and bool(EXTENSION_MODULE.match(last))


def _is_module(mods: dict[str, Module], name: str) -> bool:
    return name in mods or _is_extension(mods, name)


def _absolute(mod: Module, node: ast.ImportFrom) -> str:
    """The module an ImportFrom names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    base = mod.name.split(".")
    if not mod.is_pkg:
        base = base[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


@dataclass(frozen=True)
class Imported:
    """One name an import statement brings in: ``target`` is a module (``attr`` None) or an
    attribute ``attr`` of module ``target``; ``bound`` is the local name it gets, if any.
    ``binding_only``: the package name ``import a.b`` binds (``a``), not a dependency."""
    target: str
    attr: str | None
    bound: str | None
    line: int
    binding_only: bool = False


def imports(mods: dict[str, Module], mod: Module) -> list[Imported]:
    """Everything ``mod`` imports from modules in ``mods``, at any depth of its code."""
    out = []
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if not _is_module(mods, a.name):
                    continue
                top = a.name.split(".")[0]
                if a.asname or top == a.name:           # import a.b as x / import a
                    out.append(Imported(a.name, None, a.asname or top, node.lineno))
                else:                                   # import a.b: depends on a.b, binds a
                    out.append(Imported(a.name, None, None, node.lineno))
                    if top in mods:
                        out.append(Imported(top, None, top, node.lineno, binding_only=True))
        elif isinstance(node, ast.ImportFrom):
            src = _absolute(mod, node)
            if not _is_module(mods, src):
                continue
            for a in node.names:
                sub = f"{src}.{a.name}"
                if _is_module(mods, sub):
                    out.append(Imported(sub, None, a.asname or a.name, node.lineno))
                else:
                    out.append(Imported(src, a.name, a.asname or a.name, node.lineno))
        elif (isinstance(node, ast.Call) and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"
                   or isinstance(node.func, ast.Name) and node.func.id == "import_module")
              and _is_module(mods, node.args[0].value)):
            out.append(Imported(node.args[0].value, None, None, node.lineno))
    return out


# ---- (a) import cycles


def import_graph(mods: dict[str, Module]) -> dict[str, dict[str, int]]:
    """module -> {module it imports: line of the first such import}."""
    graph = {}
    for name, mod in mods.items():
        deps: dict[str, int] = {}
        for imp in imports(mods, mod):
            if imp.target in mods and imp.target != name and not imp.binding_only:
                deps.setdefault(imp.target, imp.line)
        graph[name] = deps
    return graph


def strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's components with more than one module (iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(graph[w])))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _a_cycle(graph, comp: list[str]) -> list[str]:
    """One cycle through the component's first module (breadth-first, so a short one)."""
    start, members = comp[0], set(comp)
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in graph[v]:
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return [start] + path[::-1][1:] + [start]
                if w in members and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return comp


def import_cycles(mods: dict[str, Module]) -> list[str]:
    graph = import_graph(mods)
    out = []
    for comp in strongly_connected(graph):
        cycle = _a_cycle(graph, comp)
        steps = [f"    {_rel(mods[a].path)}:{graph[a][b]}: {a} imports {b}"
                 for a, b in zip(cycle, cycle[1:])]
        rest = [f"    {_rel(mods[a].path)}:{line}: {a} imports {b}" for a in comp
                for b, line in graph[a].items() if b in comp and (a, b) not in zip(cycle, cycle[1:])]
        out.append(f"cycle among {', '.join(comp)}:\n" + "\n".join(steps)
                   + ("\n  other imports inside the cycle:\n" + "\n".join(rest) if rest else ""))
    return out


# ---- (b) underscore names of other modules


def _module_of(expr: ast.expr, bindings: dict[str, str], mods) -> str | None:
    """The module an expression like ``x`` or ``torchclad.engine`` denotes, if any."""
    if isinstance(expr, ast.Name):
        return bindings.get(expr.id)
    if isinstance(expr, ast.Attribute):
        base = _module_of(expr.value, bindings, mods)
        if base is not None and f"{base}.{expr.attr}" in mods:
            return f"{base}.{expr.attr}"
    return None


def _defined_private_attrs(mod: Module) -> set[str]:
    """Underscore attributes that ``mod``'s classes define: ``self._x =``, class-level ``_x``,
    methods ``_x``."""
    out = set()
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out.add(item.name)
                targets = item.targets if isinstance(item, ast.Assign) else \
                    [item.target] if isinstance(item, ast.AnnAssign) else []
                out.update(t.id for t in targets if isinstance(t, ast.Name))
                if isinstance(item, ast.Assign) and isinstance(item.value, (ast.Tuple, ast.List)) \
                        and any(isinstance(t, ast.Name) and t.id == "__slots__"
                                for t in item.targets):
                    out.update(e.value for e in item.value.elts
                               if isinstance(e, ast.Constant) and isinstance(e.value, str))
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out.update(t.attr for t in targets if isinstance(t, ast.Attribute)
                       and isinstance(t.value, ast.Name) and t.value.id in ("self", "cls"))
    return {n for n in out if _private(n)}


def private_uses(mods: dict[str, Module]) -> list[str]:
    """Uses of other modules' underscore names (see the module docstring)."""
    owners: dict[str, set[str]] = {}
    for name, mod in mods.items():
        for attr in _defined_private_attrs(mod):
            owners.setdefault(attr, set()).add(name)
    out = []
    for name, mod in mods.items():
        where = _rel(mod.path)
        bindings = {}
        for imp in imports(mods, mod):
            if imp.attr is None and imp.bound and imp.target != name:
                bindings[imp.bound] = imp.target
            if imp.attr is not None and _private(imp.attr) and imp.target != name:
                out.append(f"{where}:{imp.line}: imports {imp.attr} from {imp.target}")
            elif imp.attr is None and not imp.binding_only and imp.target != name \
                    and _private(imp.target.split(".")[-1]) and not _is_extension(mods, imp.target):
                out.append(f"{where}:{imp.line}: imports the private module {imp.target}")
        own = _defined_private_attrs(mod)
        for node in ast.walk(mod.tree):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                target, attr = node.value, node.attr
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id in ("getattr", "setattr", "hasattr") and len(node.args) >= 2 \
                    and isinstance(node.args[1], ast.Constant) \
                    and isinstance(node.args[1].value, str) and _private(node.args[1].value):
                target, attr = node.args[0], node.args[1].value
            else:
                continue
            other = _module_of(target, bindings, mods)
            if other is not None and other != name:
                if not _is_extension(mods, f"{other}.{attr}"):
                    out.append(f"{where}:{node.lineno}: uses {other}.{attr}")
            elif other is None and attr not in own and owners.get(attr, set()) - {name} \
                    and not (isinstance(target, ast.Name) and target.id in ("self", "cls")):
                src = ", ".join(sorted(owners[attr]))
                out.append(f"{where}:{node.lineno}: reads .{attr}, an attribute of {src}")
    return sorted(out, key=lambda s: (s.split(":")[0], int(s.split(":")[1])))


# ---- (c) sizes


def _rel(p: Path) -> str:
    try:
        return str(p.relative_to(REPO))
    except ValueError:
        return str(p)


def long_files(root: Path, limit: int = MAX_FILE_LINES) -> list[str]:
    out = []
    for p in sorted(root.rglob("*.py")):
        n = len(p.read_text().splitlines())
        if n > limit:
            out.append(f"{_rel(p)}: {n} lines (limit {limit})")
    return out


def says_why_long(doc: str | None) -> bool:
    return bool(doc) and bool(SAYS_LONG.search(UNSIGNED_LONG.sub("", doc)))


def long_functions(root: Path, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    out = []
    for p in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > limit and not says_why_long(ast.get_docstring(node)):
                    out.append(f"{_rel(p)}:{node.lineno}: {node.name} is {n} lines (limit "
                               f"{limit}) and its docstring does not say why it is long")
    return out


# ---- (d) RawStmt in the reverse pass


def raw_statements(root: Path) -> list[str]:
    out = []
    for p in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) \
                    else None
                if name == "RawStmt":
                    out.append(f"{_rel(p)}:{node.lineno}: constructs RawStmt")
    return out


# ---- the acceptance lines


def _check(what: str, offenders: list[str]) -> None:
    if offenders:
        pytest.fail(f"{len(offenders)} {what}:\n" + "\n".join(offenders), pytrace=False)


def test_no_import_cycle_in_torchclad():
    offenders = import_cycles(load_package(PACKAGE))
    _check("import cycle(s) in torchclad/", offenders)


def test_no_import_cycle_in_benchmarks():
    offenders = import_cycles(load_flat(BENCHMARKS))
    _check("import cycle(s) in benchmarks/", offenders)


def test_no_use_of_other_modules_underscore_names():
    offenders = private_uses(load_package(PACKAGE))
    _check("use(s) of another module's underscore names", offenders)


def test_no_file_over_500_lines():
    offenders = long_files(PACKAGE)
    _check("file(s) too long", offenders)


def test_no_function_over_80_lines_without_a_reason():
    offenders = long_functions(PACKAGE)
    _check("function(s) too long", offenders)


def test_reverse_pass_builds_no_raw_statements():
    offenders = raw_statements(PACKAGE / "engine" / "reverse")
    _check("RawStmt(s) in torchclad/engine/reverse/", offenders)


def test_tape_and_slot_statements_are_typed_nodes():
    """What RawStmt used to carry (vector slots, array sections on the tape) has its own
    node, and the IR no longer offers a verbatim statement at all."""
    from torchclad.engine import ir
    from torchclad.engine.emit.cpp import Printer

    assert not hasattr(ir, "RawStmt")
    v = ir.Var("_t0", ir.Type("double", vector=True), 0)
    n = ir.Var("_t1", ir.LONG, 0)
    p = ir.Var("p", ir.Type("double", 1, real=True), 1)
    section = ir.TapeArray(ir.Binary("+", p, ir.Const("2", ir.INT), p.type),
                           ir.Cast(n, ir.Type("std::size_t"), "static"), True)
    printed = Printer().stmts([ir.VectorDecl(v, n), ir.TapeArray(v, n, False), section], 0)
    assert printed == ["std::vector<double> _t0(_t1);", "_tape.push_array(_t0.data(), _t1);",
                       "_tape.pop_array(p + 2, static_cast<std::size_t>(_t1));"]
    assert section.var is p and ir.stmt_names(section) == {"p", "_t1"}


def test_the_checks_see_the_real_tree():
    """Guards against the checks passing because they scan nothing."""
    mods = load_package(PACKAGE)
    assert {"torchclad", "torchclad.engine.ir", "torchclad.bridge.gradient"} <= set(mods)
    graph = import_graph(mods)
    assert "torchclad.bridge.gradient" in graph["torchclad"]
    assert "torchclad.engine.ir" in graph["torchclad.engine.reverse.transform"]
    assert "benchlib" in import_graph(load_flat(BENCHMARKS))["bench_reverse"]
    assert (PACKAGE / "engine" / "reverse").is_dir()


# ---- self-tests: each checker catches a planted violation


def _tree(tmp_path: Path, files: dict[str, str], package: str = "pkg") -> Path:
    root = tmp_path / package
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


CLEAN = {
    "__init__.py": "from pkg.low import helper\n",
    "low.py": "def helper():\n    return 1\n",
    "high.py": "import pkg.low as low\nfrom . import low as again\n\n"
               "def f():\n    from pkg import low\n    return low.helper() + again.helper()\n",
    "uses_ext.py": "from pkg import _C\nimport pkg._C_avx2\n\ndef g():\n    return _C.f\n",
}


def test_clean_tree_has_no_offenders(tmp_path):
    root = _tree(tmp_path, CLEAN)
    mods = load_package(root)
    assert import_cycles(mods) == [] and private_uses(mods) == []
    assert long_files(root) == [] and long_functions(root) == [] and raw_statements(root) == []


def test_planted_cycles_are_caught_even_inside_functions(tmp_path):
    root = _tree(tmp_path, {
        "__init__.py": "",
        "a.py": "from pkg.b import g\n",
        "b.py": "def g():\n    from . import c\n",
        "c.py": "def h():\n    import pkg.a\n",
        "d.py": "import pkg.a\n",                       # into the cycle, not on it
    })
    (cycle,) = import_cycles(load_package(root))
    assert cycle.startswith("cycle among pkg.a, pkg.b, pkg.c:")
    assert "pkg/b.py:2: pkg.b imports pkg.c" in cycle and "pkg.d" not in cycle
    flat = _tree(tmp_path, {"one.py": "import two\n", "two.py": "def f():\n    from one import x\n",
                            "three.py": "import one\n"}, package="bench")
    (cycle,) = import_cycles(load_flat(flat))
    assert cycle.startswith("cycle among one, two:")


def test_planted_underscore_uses_are_caught(tmp_path):
    root = _tree(tmp_path, {
        "__init__.py": "",
        "owner.py": "_table = {}\n\nclass Box:\n    def __init__(self):\n        self._k = 1\n\n"
                    "    def size(self):\n        return self._k\n",
        "imp.py": "from pkg.owner import _table\n",
        "rel.py": "def f():\n    from .owner import _table as t\n    return t\n",
        "attr.py": "import pkg.owner\nfrom pkg import owner as o\n\n"
                   "def f():\n    return pkg.owner._table, o._table, getattr(o, '_table')\n",
        "obj.py": "def f(box):\n    return box._k\n",
        "mod.py": "from pkg import _hidden\n",
        "_hidden.py": "",
    })
    found = "\n".join(private_uses(load_package(root)))
    for line in ("pkg/imp.py:1: imports _table from pkg.owner",
                 "pkg/rel.py:2: imports _table from pkg.owner",
                 "pkg/attr.py:5: uses pkg.owner._table",
                 "pkg/obj.py:2: reads ._k, an attribute of pkg.owner",
                 "pkg/mod.py:1: imports the private module pkg._hidden"):
        assert line in found, found
    assert found.count("pkg/attr.py:5:") == 3, found      # pkg.owner._table, o._table, getattr
    assert "pkg/owner.py" not in found                     # its own names are its own


def test_planted_long_file_and_function_are_caught(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(85))
    root = _tree(tmp_path, {
        "big.py": "x = 1\n" * 501,
        "fine.py": "x = 1\n" * 500,
        "f.py": f"def short():\n    return 1\n\n\ndef long_one():\n{body}\n\n"
                f"def explained():\n    \"\"\"Long because it is one table of cases.\"\"\"\n{body}\n\n"
                f"def typed():\n    \"\"\"Returns a long double.\"\"\"\n{body}",
    })
    assert long_files(root) == [f"{_rel(root / 'big.py')}: 501 lines (limit 500)"]
    found = long_functions(root)
    assert [f.split(": ")[1].split()[0] for f in found] == ["long_one", "typed"], found


def test_planted_raw_statement_is_caught(tmp_path):
    root = _tree(tmp_path, {"t.py": "from .. import ir\nfrom ..ir import RawStmt\n\n"
                                    "def f():\n    return [ir.RawStmt('x;'), RawStmt('y;')]\n\n"
                                    "def g(s):\n    return isinstance(s, ir.RawStmt)\n"})
    assert raw_statements(root) == [f"{_rel(root / 't.py')}:5: constructs RawStmt"] * 2
