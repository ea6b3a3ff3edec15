"""Loops unswitched on tests that cannot change while they run.

Two kinds of test qualify.

**The entry tests of conditional records.** The element-sensitive analysis
(`analysis/regions.py`) proves some overwrites safe only under a condition on the integers
(`Vp - V >= 0`: a row's padding does not reach the next row). The generated code tests it once
on entry, into a flag, and records or restores only when the test failed:

    bool _disjoint0 = (long)Vp - (long)V >= 0;
    for (int i = V; i-- > 0; ) {
        float _r_d2 = _d_probs[p - probs + i]; _d_probs[p - probs + i] = 0;
        _d_sum += -_r_d2 * p[i] / sum;
        if (!_disjoint0) { p[i] = _tape.pop<float>(); }
        _d_probs[p - probs + i] += _r_d2 / sum;
    }

The flag does not change in the loop, but the tape operation under it keeps every later pass
(`loop_order.py`: forward order, lane sums) and the vectoriser away from the loop.

**Null tests of optional pointer parameters** (`bias != nullptr`, `bias != NULL`, `!bias`,
`bias ? bias[i] : 0`) of a parameter the function never assigns nor takes the address of
(`fixed`). The reverse keeps them as they were (`reverse/assemble.py`), so an adjoint store
under one (`if (bias != nullptr) _d_bias[i] += ...`) is a conditional store in the loop:
g++ then keeps the loop's lane sums in memory instead of registers (the layernorm sweep: 6-10%
slower than the same loop without the tests).

Such a loop is split in two: the loop with every test assumed to pass (flags true, pointers
not null; the tests, and what they guard when they fail, removed) when all of them do, and the
loop as it was otherwise (with its tests taken as failed when it has one test only):

    if (_disjoint0) { for (...) { ...no tape... } } else { for (...) { ...records always... } }
    if (weight != nullptr && bias != nullptr) { for (...) { ...no tests... } }
    else { for (...) { ...tests... } }

A loop is unswitched when its body tests them directly (through `if`s -- or, for a pointer,
any expression -- not through a nested loop: an outer loop is not duplicated for its inner
loops' tests; outer loops are looked at first; the slow copy keeps its inner loops as they
were, except when the loop has one test: that copy then takes it as failed, and its inner
loops are unswitched in turn), only on the flags tested as a whole `if` condition
(`_disjointK` or `!_disjointK`), and not when the loop carries an OpenMP pragma (its reverse
is planned by `reverse/omp.py` as one loop; the loops inside it are still unswitched). The
flags are declared once at the top of a generated function and never assigned, and the
pointers are never assigned either, so both copies compute what the original did.
"""
from __future__ import annotations

from .. import ir
from ..names import DISJOINT_FLAG
from ..rewrite import map_stmt
from .simplify import dead_code

TRUE = ir.Const("true", ir.BOOL)
FALSE = ir.Const("false", ir.BOOL)
NULL = ir.Const("nullptr", ir.Type("void", ptr=1))


def unswitch(stmts, fixed: frozenset = frozenset()) -> list:
    """stmts: a generated function body; fixed: uids of the pointer parameters the function
    never assigns nor takes the address of (their null tests qualify)."""
    return [_stmt(s, fixed) for s in stmts]


def _stmt(s, fixed):
    if isinstance(s, ir.Block):
        return ir.Block(tuple(_stmt(x, fixed) for x in s.stmts), s.loc)
    if isinstance(s, ir.If):
        return ir.If(s.cond, _stmt(s.then, fixed), _stmt(s.other, fixed), s.loc)
    if isinstance(s, ir.Switch):
        return ir.Switch(s.cond, _stmt(s.body, fixed), s.loc)
    if not isinstance(s, ir.Loop):
        return s
    flags = sorted(_tested(s.body))
    pointers = _null_tested(s.body, fixed)
    if (not flags and not pointers) or s.pragma:
        return _loop(s, _stmt(s.body, fixed))
    fast = _pruned(_loop(s, _stmt(_assume(s.body, set(flags), pointers), fixed)))
    slow = s
    if len(flags) + len(pointers) == 1:     # the one test fails there: it goes too
        slow = _pruned(_loop(s, _stmt(_assume(s.body, set(flags), pointers, False), fixed)))
    tests = [ir.Var(f, ir.BOOL, 0) for f in flags]
    tests += [ir.Binary("!=", p, NULL, ir.BOOL) for p in sorted(pointers.values(),
                                                                   key=lambda v: v.name)]
    cond = tests[0]
    for t in tests[1:]:
        cond = ir.Binary("&&", cond, t, ir.BOOL)
    return ir.If(cond, ir.Block((fast,), s.loc), ir.Block((slow,), s.loc), s.loc)


def _pruned(loop: ir.Loop) -> ir.Loop:
    """loop without the locals only the removed branches read (a tape pop stays: the tape
    must stay in step)."""
    got = dead_code([loop])
    return got[0] if len(got) == 1 and isinstance(got[0], ir.Loop) else loop


def _loop(s: ir.Loop, body: ir.Block) -> ir.Loop:
    return ir.Loop(s.init, s.cond, s.inc, body, s.loc, s.pragma, s.do_while)


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


def _direct(body: ir.Block):
    """The statements of body, nested blocks, ifs and switches included, nested loops not."""
    for s in body.stmts:
        yield s
        if isinstance(s, ir.If):
            yield from _direct(s.then)
            yield from _direct(s.other)
        elif isinstance(s, ir.Block):
            yield from _direct(s)
        elif isinstance(s, ir.Switch):
            yield from _direct(s.body)


def _tested(body: ir.Block) -> set:
    """Flags tested as a whole `if` condition in body, nested loops excepted, less any flag
    the body (nested loops included) uses any other way (those are not assumed away)."""
    direct = {_flag_test(s.cond)[0] for s in _direct(body) if isinstance(s, ir.If)} - {None}
    other = set()
    for x in ir.walk_stmts(body):
        if isinstance(x, ir.If) and _flag_test(x.cond)[0] is not None:
            continue
        for e in ir.stmt_exprs(x):
            other.update(n for n in ir.names_in(e) if _is_flag(n))
    return direct - other


def _null_test(e, fixed, boolean: bool) -> "tuple | None":
    """(the pointer Var, the test's value when it is not null) of `p != nullptr`, `p == 0`,
    `(bool)p` -- or `p` where a truth value is read (boolean) -- on a pointer in fixed, else
    None. (`!p` is `!` of the test `p`.)"""
    if isinstance(e, ir.Cast) and e.type.base == "bool" and not e.type.ptr:
        e, boolean = e.operand, True
    if isinstance(e, ir.Var):
        return (e, True) if boolean and _fixed_pointer(e, fixed) else None
    if isinstance(e, ir.Binary) and e.op in ("==", "!="):
        for p, q in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
            if isinstance(p, ir.Var) and _fixed_pointer(p, fixed) and _is_null(q):
                return p, e.op == "!="
    return None


def _fixed_pointer(v: ir.Var, fixed) -> bool:
    return v.uid in fixed and v.type.ptr > 0 and not v.type.ref and not v.type.dims


def _is_null(e) -> bool:
    while isinstance(e, ir.Cast):
        e = e.operand
    return isinstance(e, ir.Const) and e.text in ("nullptr", "0", "NULL", "__null")


def _map_tests(e, fixed, f, boolean: bool = False):
    """e with every null test on a pointer in fixed replaced by f(the test) (None: kept)."""
    got = _null_test(e, fixed, boolean)
    if got is not None:
        new = f(got)
        return e if new is None else new
    kids = ir.children(e)
    if not kids:
        return e
    if isinstance(e, ir.Unary) and e.op == "!" or isinstance(e, ir.Binary) and e.op in ("&&",
                                                                                        "||"):
        ctx = (True, True)
    elif isinstance(e, ir.Cond):
        ctx = (True, False, False)
    else:
        ctx = (False,) * len(kids)
    new = tuple(_map_tests(k, fixed, f, c) for k, c in zip(kids, ctx))
    return e if new == kids else ir.rebuild(e, new)


def _stmt_tests(s, fixed, f):
    """s (and the statements nested in it) with its null tests mapped by _map_tests; the
    condition of an `if` or a loop is read as a truth value."""
    def m(e, boolean=False):
        return _map_tests(e, fixed, f, boolean) if e is not None else None
    if isinstance(s, ir.If):
        return ir.If(m(s.cond, True), _stmt_tests(s.then, fixed, f),
                     _stmt_tests(s.other, fixed, f), s.loc)
    if isinstance(s, ir.Loop):
        return ir.Loop(tuple(_stmt_tests(x, fixed, f) for x in s.init), m(s.cond, True),
                       tuple(_stmt_tests(x, fixed, f) for x in s.inc),
                       _stmt_tests(s.body, fixed, f), s.loc, s.pragma, s.do_while)
    if isinstance(s, ir.Block):
        return ir.Block(tuple(_stmt_tests(x, fixed, f) for x in s.stmts), s.loc)
    if isinstance(s, ir.Switch):
        return ir.Switch(m(s.cond), _stmt_tests(s.body, fixed, f), s.loc)
    return map_stmt(s, lambda e: m(e))


def _null_tested(body: ir.Block, fixed) -> dict:
    """uid -> Var of the pointers in fixed whose null test some expression of body holds,
    nested loops excepted."""
    found: dict = {}
    if not fixed:
        return found

    def note(got):
        found[got[0].uid] = got[0]
    for s in _direct(body):
        if isinstance(s, ir.If):
            _map_tests(s.cond, fixed, note, True)
        elif not isinstance(s, (ir.Loop, ir.Block, ir.Switch)):
            for e in ir.stmt_exprs(s):
                _map_tests(e, fixed, note)
    return found


def _assume(block: ir.Block, flags: set, pointers: dict, value: bool = True) -> ir.Block:
    """block with every test on one of flags, or null test of one of pointers, replaced by its
    value when the flags have that value and the pointers are all null (value False) or none
    is (value True); then the `if`s that became constant by the branch they take."""
    if pointers:
        block = _stmt_tests(block, frozenset(pointers),
                            lambda got: TRUE if got[1] == value else FALSE)
    if flags:       # (tested only as whole `if` conditions: _tested)
        const = TRUE if value else FALSE
        block = map_stmt(block, lambda e: const if isinstance(e, ir.Var) and e.name in flags
                         else None)
    return _fold(block)


# ----------------------------------------------------------------------------- constant tests
def _truth(e) -> "bool | None":
    if e is TRUE or (isinstance(e, ir.Const) and e.text == "true"):
        return True
    if e is FALSE or (isinstance(e, ir.Const) and e.text == "false"):
        return False
    return None


def _fold_expr(e):
    """e with `true && x`, `!false`, `true ? a : b`, ... folded (bottom-up)."""
    kids = ir.children(e)
    if kids:
        new = tuple(_fold_expr(k) for k in kids)
        if new != kids:
            e = ir.rebuild(e, new)
    if isinstance(e, ir.Unary) and e.op == "!" and _truth(e.operand) is not None:
        return FALSE if _truth(e.operand) else TRUE
    if isinstance(e, ir.Binary) and e.op in ("&&", "||"):
        a, b = _truth(e.lhs), _truth(e.rhs)
        absorbing = e.op == "||"
        if a is not None:
            return (TRUE if absorbing else FALSE) if a == absorbing else e.rhs
        if b is not None and b != absorbing:
            return e.lhs                   # x && true, x || false (x still evaluated)
    if isinstance(e, ir.Cond) and _truth(e.cond) is not None:
        taken = e.then if _truth(e.cond) else e.other
        t = taken.type
        if (t.base, t.ptr) != (e.type.base, e.type.ptr):   # `p ? 1 : 0.5f` is a float
            taken = ir.Cast(taken, e.type, "c")
        return taken
    return e


def _fold(block: ir.Block) -> ir.Block:
    """block with its constant `if`s replaced by the branch they take (expressions folded)."""
    out = []
    for s in block.stmts:
        if isinstance(s, ir.If):
            cond = _fold_expr(s.cond)
            t = _truth(cond)
            if t is not None:
                out.extend(_fold(s.then if t else s.other).stmts)
                continue
            s = ir.If(cond, _fold(s.then), _fold(s.other), s.loc)
        elif isinstance(s, ir.Block):
            s = _fold(s)
        elif isinstance(s, ir.Loop):
            s = ir.Loop(tuple(_fold_stmt(x) for x in s.init),
                        _fold_expr(s.cond) if s.cond is not None else None,
                        tuple(_fold_stmt(x) for x in s.inc), _fold(s.body), s.loc, s.pragma,
                        s.do_while)
        elif isinstance(s, ir.Switch):
            s = ir.Switch(_fold_expr(s.cond), _fold(s.body), s.loc)
        else:
            s = _fold_stmt(s)
        out.append(s)
    return ir.Block(tuple(out), block.loc)


def _fold_stmt(s):
    """A simple statement with its expressions folded."""
    return map_stmt(s, lambda e: _fold_expr(e))
