"""The zeroing of a row an iteration owns, folded into the first pass over the row.

The assigning sweep zeroes each row of an input adjoint that an iteration owns at the start
of the iteration (rows.py), then adds into it. `fold_zeroing` saves that pass where it can
(softmax's, layernorm's and SiLU's assigning sweeps). When the first statement after the
zeroing loop that names the adjoint writes every element of the row once before anything
reads one, that write assigns (`_d_inp[x - inp + i] = v`) and the zeroing loop goes. Shown
on the finished sweep, for that statement:

- a loop `for (int i = lo; i < hi; i += 1)` (or its `omp simd`) with lo = 0 and hi = sigma,
  whose body names the adjoint once, as `root[e] += v` at its top level, e being the zeroing
  loop's element at counter i (as polynomials, analysis/affine.py, through the row pointers
  declared before it), and no `break`, `continue`, `return` or `switch` anywhere in it;
- that loop run in blocks of lanes and a rest loop (opt/loop_order.py), both as above;
- `root[e] += v` itself, for a row of one element;
- an `if` whose condition does not name the adjoint, each branch as above (the versions of
  a loop, opt/unswitch.py).

Assigning gives the bits the zeroing and the addition gave, but for the sign of a zero
(0 + -0 is +0).
"""
from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..analysis.affine import Coord, Space, key
from ..analysis.bounds import const, frozen
from .rows import Row, is_zeroing, mentions


def fold_zeroing(body: list, root: str, row: Row) -> list:
    """The finished assigning sweep (`placed` holds) with each zeroing loop of `row` folded
    into the first pass over the row, where that pass writes every element of the row once:
    its `+=` becomes `=` and the zeroing loop goes (see the module docstring). Elsewhere the
    zeroing loop stays."""
    return _fold_list(list(body), root, row)


def _fold_list(stmts: list, root: str, row: Row) -> list:
    for k, s in enumerate(stmts):
        if is_zeroing(s, row.marker):
            got = _fold_at(stmts, k, root)
            return stmts if got is None else got
    return [_fold_stmt(s, root, row) for s in stmts]


def _fold_stmt(s, root: str, row: Row):
    if isinstance(s, ir.Loop):
        return replace(s, body=_block(s.body, _fold_list(list(s.body.stmts), root, row)))
    if isinstance(s, ir.Block):
        return _block(s, _fold_list(list(s.stmts), root, row))
    if isinstance(s, ir.If):
        return replace(s, then=_fold_stmt(s.then, root, row), other=_fold_stmt(s.other, root, row))
    return s


def _block(b: ir.Block, stmts: list) -> ir.Block:
    return ir.Block(tuple(stmts), b.loc)


class _Pass:
    """What the first pass over a row must write: element `at` of the zeroing loop for each
    value of its counter `z` in [0, sigma), read in `sp` with the locals of the statements
    around it (`varying`: the variables they assign)."""

    def __init__(self, zero: ir.Loop, root: str, stmts: list):
        self.root = root
        self.z = zero.init[0].var
        self.at = zero.body.stmts[0].target.index
        self.sp = Space()
        self.varying = _assigned(stmts)
        self.sp.varying = self.varying
        self.sigma = self.sp.poly(zero.cond.rhs)

    def defs(self, stmts) -> None:
        """Take the pointer locals declared in stmts (row pointers `x = inp + n * C`)."""
        for s in stmts:
            if isinstance(s, ir.Decl) and s.init is not None and s.var.type.is_pointer \
                    and key(s.var) not in self.varying:
                self.sp.defs[key(s.var)] = s.init

    def runs_over_row(self, v: ir.Var, lo, hi) -> bool:
        """A loop of counter v from lo while v < hi runs over [0, sigma)."""
        p_lo, p_hi = self.sp.poly(lo), self.sp.poly(hi)
        return (self.sigma is not None and p_lo == {} and p_hi is not None
                and frozen(p_hi) == frozen(self.sigma))

    def same_element(self, index, v: "ir.Var | None") -> bool:
        """index, with v the loop counter, is the zeroing loop's element at z = v (v None:
        a row of one element, at z = 0)."""
        sp = self.sp
        if v is None:
            sp.defs[key(self.z)] = ir.Const("0", ir.LONG)
            sp.varying = self.varying - {key(self.z)}
        else:
            sp.coords[key(v)] = Coord((), (), 1, 0)
            sp.alias = {key(self.z): key(v)}
            sp.varying = self.varying - {key(v)}
        try:
            a, b = sp.poly(index), sp.poly(self.at)
        finally:
            if v is None:
                del sp.defs[key(self.z)]
            else:
                del sp.coords[key(v)]
            sp.alias, sp.varying = {}, self.varying
        return a is not None and b is not None and frozen(a) == frozen(b)


def _assigned(stmts) -> set:
    """Keys of the variables stmts assign (loop headers and steps included)."""
    out = set()
    for s in stmts:
        for x in ir.walk_stmts(s):
            if isinstance(x, ir.Assign) and isinstance(x.target, ir.Var):
                out.add(key(x.target))
            for e in ir.stmt_exprs(x):
                for y in ir.walk_expr(e):
                    if isinstance(y, ir.Raw) and y.assigns and isinstance(y.reads[0], ir.Var):
                        out.add(key(y.reads[0]))
                    elif isinstance(y, ir.Unary) and y.op == "&" and \
                            isinstance(y.operand, ir.Var):
                        out.add(key(y.operand))
    return out


def _fold_at(stmts: list, k: int, root: str) -> "list | None":
    """stmts with the zeroing loop stmts[k] folded into the first statement after it that
    names root, or None."""
    m = next((j for j in range(k + 1, len(stmts)) if mentions(stmts[j], root)), None)
    if m is None:
        return None
    want = _Pass(stmts[k], root, stmts)
    want.defs(stmts[:m])
    got = _covering(stmts[m], want)
    return None if got is None else stmts[:k] + stmts[k + 1:m] + [got] + stmts[m + 1:]


def _covering(s, want: _Pass):
    """s with its first pass over the row assigning, when s writes every element of the row
    once before it reads any (on every path), else None."""
    if isinstance(s, ir.If):
        if want.root in ir.names_in(s.cond):
            return None
        then, other = _covering_list(s.then.stmts, want), _covering_list(s.other.stmts, want)
        if then is None or other is None:
            return None
        return replace(s, then=_block(s.then, then), other=_block(s.other, other))
    if isinstance(s, ir.Block):
        got = _lanes(s, want)
        if got is None:
            got = _covering_list(s.stmts, want)
        return None if got is None else _block(s, got)
    if isinstance(s, ir.Assign):       # a row of one element: `root[e] += x`
        if want.sigma is None or frozen(want.sigma) != frozen(const(1)) or \
                not _accumulates(s, want.root) or not want.same_element(s.target.index, None):
            return None
        return replace(s, op="=")
    if isinstance(s, ir.Loop):
        head = _counted(s)
        if head is None or not want.runs_over_row(*head):
            return None
        body = _one_pass(s.body, head[0], want)
        return None if body is None else replace(s, body=body)
    return None


def _covering_list(stmts, want: _Pass) -> "list | None":
    stmts = list(stmts)
    m = next((j for j, s in enumerate(stmts) if mentions(s, want.root)), None)
    if m is None:
        return None
    want.defs(stmts[:m])
    got = _covering(stmts[m], want)
    return None if got is None else stmts[:m] + [got] + stmts[m + 1:]


def _counted(loop: ir.Loop) -> "tuple | None":
    """(v, lo, hi) of `for (int v = lo; v < hi; v += 1)` (or its `omp simd`), else None."""
    if loop.do_while or loop.pragma not in ("", "omp simd") or len(loop.init) != 1 \
            or len(loop.inc) != 1:
        return None
    d, c, inc = loop.init[0], loop.cond, loop.inc[0]
    if not (isinstance(d, ir.Decl) and d.init is not None and _is_var(c, "<", d.var)
            and _is_step(inc, d.var, "1")):
        return None
    return d.var, d.init, c.rhs


def _is_var(c, op: str, v: ir.Var) -> bool:
    """c is `v <op> ...`."""
    return isinstance(c, ir.Binary) and c.op == op and isinstance(c.lhs, ir.Var) \
        and c.lhs.name == v.name


def _is_step(s, v: ir.Var, n: str) -> bool:
    """s is `v += n`."""
    return isinstance(s, ir.Assign) and s.op == "+=" and isinstance(s.target, ir.Var) \
        and s.target.name == v.name and isinstance(s.value, ir.Const) and s.value.text == n


def _one_pass(body: ir.Block, v: ir.Var, want: _Pass) -> "ir.Block | None":
    """The body of a loop of counter v with its one mention of the row, `root[e] += x` at
    its top level with e the element the zeroing writes at z = v, made `root[e] = x`; None
    for any other body, or one that may leave an iteration early."""
    for x in ir.walk_stmts(body):
        if isinstance(x, (ir.Break, ir.Continue, ir.Return, ir.Switch)):
            return None
    if key(v) in _assigned(list(body.stmts)):
        return None
    hits = [j for j, x in enumerate(body.stmts) if mentions(x, want.root)]
    if len(hits) != 1:
        return None
    a = body.stmts[hits[0]]
    if not _accumulates(a, want.root):
        return None
    want.defs(body.stmts[:hits[0]])
    if not want.same_element(a.target.index, v):
        return None
    stmts = list(body.stmts)
    stmts[hits[0]] = replace(a, op="=")
    return _block(body, stmts)


def _lanes(b: ir.Block, want: _Pass) -> "list | None":
    """The statements of a loop run in blocks of lanes (opt/loop_order.py's `_in_lanes`),
    the block loop and the rest loop each made assigning by `_one_pass`, when together they
    run over the row; else None.

        { <lane arrays>; int _ib = lo; for (; _ib + W <= hi; _ib += W)
              for (int _j = 0; _j < W; _j += 1) { int i = _ib + _j; body }
          for (int i = _ib; i < hi; i += 1) body
          <lanes added up> }
    """
    st = list(b.stmts)
    at = next((j for j, s in enumerate(st) if isinstance(s, ir.Loop)), None)
    if at is None or at < 1 or at + 1 >= len(st) or \
            any(mentions(s, want.root) for s in st[:at] + st[at + 2:]):
        return None
    start, blocks, rest = st[at - 1], st[at], st[at + 1]
    if not (isinstance(start, ir.Decl) and start.init is not None and not blocks.init
            and len(blocks.inc) == 1 and len(blocks.body.stmts) == 1
            and isinstance(rest, ir.Loop)):
        return None
    ib, c, inner = start.var, blocks.cond, blocks.body.stmts[0]
    if not (isinstance(c, ir.Binary) and c.op == "<=" and isinstance(c.lhs, ir.Binary)
            and c.lhs.op == "+" and isinstance(c.lhs.lhs, ir.Var) and c.lhs.lhs.name == ib.name
            and isinstance(c.lhs.rhs, ir.Const)):
        return None
    width, hi = c.lhs.rhs.text, c.rhs
    inner_head, rest_head = (_counted(inner) if isinstance(inner, ir.Loop) else None,
                             _counted(rest))
    if inner_head is None or rest_head is None or not _is_step(blocks.inc[0], ib, width):
        return None
    j, j0, j_hi = inner_head
    v, v0, v_hi = rest_head
    first = inner.body.stmts[0] if inner.body.stmts else None
    if not (isinstance(j0, ir.Const) and j0.text == "0" and isinstance(j_hi, ir.Const)
            and j_hi.text == width and isinstance(v0, ir.Var) and v0.name == ib.name
            and v_hi == hi and isinstance(first, ir.Decl) and first.var.name == v.name
            and first.init is not None and first.init == ir.Binary("+", ib, j, first.init.type)
            and want.runs_over_row(ib, start.init, hi)):
        return None
    moved = _assigned([inner.body, rest.body])
    if key(ib) in moved or key(j) in moved:
        return None
    blocked = _one_pass(ir.Block(inner.body.stmts[1:]), first.var, want)
    tail = _one_pass(rest.body, v, want)
    if blocked is None or tail is None:
        return None
    inner = replace(inner, body=_block(inner.body, [first] + list(blocked.stmts)))
    st[at] = replace(blocks, body=_block(blocks.body, [inner]))
    st[at + 1] = replace(rest, body=tail)
    return st


def _accumulates(a, root: str) -> bool:
    """a is `root[e] += x`, naming root nowhere else."""
    return (isinstance(a, ir.Assign) and a.op == "+=" and isinstance(a.target, ir.Index)
            and isinstance(a.target.base, ir.Var) and a.target.base.name == root
            and mentions(a, root) == 1)
