"""Loops unswitched on the entry tests of conditional records.

The element-sensitive analysis (`analysis/regions.py`) proves some overwrites safe only under a
condition on the integers (`Vp - V >= 0`: a row's padding does not reach the next row). The
generated code tests it once on entry, into a flag, and records or restores only when the test
failed:

    bool _disjoint0 = (long)Vp - (long)V >= 0;
    for (int i = V; i-- > 0; ) {
        float _r_d2 = _d_probs[p - probs + i]; _d_probs[p - probs + i] = 0;
        _d_sum += -_r_d2 * p[i] / sum;
        if (!_disjoint0) { p[i] = _tape.pop<float>(); }
        _d_probs[p - probs + i] += _r_d2 / sum;
    }

The flag does not change in the loop, but the tape operation under it keeps every later pass
(`loop_order.py`: forward order, lane sums) and the vectoriser away from the loop. This pass
splits such a loop in two, the loop with every flag it tests assumed true (the tests and what
they guard removed) when all of them hold, the loop as it was otherwise (with its tests taken
as failed when it tests one flag only):

    if (_disjoint0) { for (...) { ...no tape... } } else { for (...) { ...records always... } }

A loop is unswitched when its body tests a flag directly (through `if`s, not through a nested
loop: an outer loop is not duplicated for its inner loops' tests; outer loops are looked at
first; the slow copy keeps its inner loops as they were), only on
the flags tested as a whole `if` condition (`_disjointK` or `!_disjointK`), and not when the
loop carries an OpenMP pragma (its reverse is planned by `reverse/omp.py` as one loop; the
loops inside it are still unswitched). The flags are declared once at the top of a generated
function and never assigned, so both copies compute what the original did.
"""
from __future__ import annotations

from .. import ir
from ..names import DISJOINT_FLAG


def unswitch(stmts) -> list:
    """stmts: a generated function body."""
    return [_stmt(s) for s in stmts]


def _stmt(s):
    if isinstance(s, ir.Block):
        return ir.Block(tuple(_stmt(x) for x in s.stmts), s.loc)
    if isinstance(s, ir.If):
        return ir.If(s.cond, _stmt(s.then), _stmt(s.other), s.loc)
    if isinstance(s, ir.Switch):
        return ir.Switch(s.cond, _stmt(s.body), s.loc)
    if not isinstance(s, ir.Loop):
        return s
    flags = sorted(_tested(s.body))
    if not flags or s.pragma:
        return ir.Loop(s.init, s.cond, s.inc, _stmt(s.body), s.loc, s.pragma, s.do_while)
    fast = ir.Loop(s.init, s.cond, s.inc, _stmt(_assume(s.body, set(flags))), s.loc, s.pragma,
                   s.do_while)
    slow = s
    if len(flags) == 1:     # the one flag is false there: its tests go too
        slow = ir.Loop(s.init, s.cond, s.inc, _assume(s.body, set(flags), False), s.loc,
                       s.pragma, s.do_while)
    cond = None
    for f in flags:
        v = ir.Var(f, ir.BOOL, 0)
        cond = v if cond is None else ir.Binary("&&", cond, v, ir.BOOL)
    return ir.If(cond, ir.Block((fast,), s.loc), ir.Block((slow,), s.loc), s.loc)


def _flag_test(cond) -> tuple:
    """(flag name, whether the test is negated) of an `if` condition `_disjointK` or
    `!_disjointK`, else (None, False)."""
    negated = isinstance(cond, ir.Unary) and cond.op == "!"
    v = cond.operand if negated else cond
    if isinstance(v, ir.Var) and _is_flag(v.name):
        return v.name, negated
    return None, False


def _is_flag(name: str) -> bool:
    return name.startswith(DISJOINT_FLAG) and name[len(DISJOINT_FLAG):].isdigit()


def _tested(body: ir.Block) -> set:
    """Flags tested as a whole `if` condition in body, nested loops excepted, less any flag
    the body (nested loops included) uses any other way (those are not assumed away)."""
    direct = set()

    def visit(s):
        if isinstance(s, ir.If):
            name, _ = _flag_test(s.cond)
            if name is not None:
                direct.add(name)
            visit(s.then)
            visit(s.other)
        elif isinstance(s, (ir.Block, ir.Switch)):
            for x in (s.stmts if isinstance(s, ir.Block) else s.body.stmts):
                visit(x)

    visit(body)
    other = set()
    for x in ir.walk_stmts(body):
        if isinstance(x, ir.If) and _flag_test(x.cond)[0] is not None:
            continue
        for e in ir.stmt_exprs(x):
            other.update(n for n in ir.names_in(e) if _is_flag(n))
    return direct - other


def _assume(block: ir.Block, flags: set, value: bool = True) -> ir.Block:
    """block with every `if` on one of flags replaced by the branch taken when the flags have
    that value."""
    out = []
    for s in block.stmts:
        if isinstance(s, ir.If):
            name, negated = _flag_test(s.cond)
            if name in flags:
                taken = s.then if value != negated else s.other
                out.extend(_assume(taken, flags, value).stmts)
                continue
            s = ir.If(s.cond, _assume(s.then, flags, value), _assume(s.other, flags, value),
                      s.loc)
        elif isinstance(s, ir.Block):
            s = _assume(s, flags, value)
        elif isinstance(s, ir.Loop):
            s = ir.Loop(s.init, s.cond, s.inc, _assume(s.body, flags, value), s.loc, s.pragma,
                        s.do_while)
        elif isinstance(s, ir.Switch):
            s = ir.Switch(s.cond, _assume(s.body, flags, value), s.loc)
        out.append(s)
    return ir.Block(tuple(out), block.loc)
