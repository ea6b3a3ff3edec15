"""Rows an iteration owns (engine/reverse/rows.py): the assigning sweep zeroes them itself.

Where each iteration n of a parallel reverse loop touches an input adjoint only within its
row [sigma * n, sigma * n + sigma), the assigning sweep zeroes that row at the start of the
iteration and the C++ backward passes an uninitialised buffer (no zero fill) when the buffer
has exactly N * sigma elements (extent "N*C"), a zero-filled one when it has more. Where the
first pass over the row writes each of its elements once, the zeroing is folded into that
pass: its `+=` becomes `=` (reverse/first_pass.py).
"""
from __future__ import annotations

import re

import pytest
import torch

import torchclad
from torchclad import engine as ad
from torchclad.bridge import op as ops

ROWNORM = r"""
#include <cmath>
void rownorm(double* out, const double* x, const double* w, int m, int n) {
    #pragma omp parallel for
    for (int r = 0; r < m; r++) {
        const double* xr = x + r * n;
        double s = 0;
        for (int i = 0; i < n; i++) s += xr[i] * xr[i];
        double k = 1.0 / std::sqrt(s / n + 1e-5);
        for (int i = 0; i < n; i++) out[r * n + i] = xr[i] * k * w[i];
    }
}
"""

ZERO_ROW = re.compile(r"for \(long (_t\d+) = 0; \1 < [^;]*; \+\+\1\) \{\n\s*_d_x\[[^;]*\] = 0;")
# an element of the row assigned a value, not added into (the zeroing folded)
ASSIGNED = re.compile(r"_d_x\[[^\]]*\] = (?!0;)")


def test_engine_owns_rows_in_the_assigning_sweep_only():
    d = ad.differentiate(ROWNORM, "rownorm", ["x", "w"])
    assert d.assign_extents == (("x", "m*n"), ("w", ""))
    assert set(d.assign_nonneg) >= {"m", "n"}
    f = dict(d.functions)
    # the row's first pass (the reverse of the output loop, run in blocks of 16 and a rest
    # loop) writes each element once: it assigns, and nothing zeroes the row first
    sweep = f["rownorm_reverse_sweep_assign"]
    assert not ZERO_ROW.search(sweep) and len(ASSIGNED.findall(sweep)) == 2, sweep
    assert len(re.findall(r"_d_x\[[^\]]*\] \+= ", sweep)) == 1   # the second pass adds
    # the accumulating sweep keeps Clad's contract: it adds into what the caller zeroed
    assert not ZERO_ROW.search(f["rownorm_reverse_sweep"])
    assert not ASSIGNED.search(f["rownorm_reverse_sweep"])


def _rows(body: str, params: str = "int m, int n, int p") -> str:
    return ("void f(double* out, const double* x, " + params + ") {\n" + body + "\n}\n")


OWNED = {
    "row": "#pragma omp parallel for\n for (int r = 0; r < m; r++) "
           "for (int i = 0; i < n; i++) out[r * n + i] = x[r * n + i] * x[r * n + i];",
    # collapse(2): iteration (r, i) is number r * n + i, its row one element wide
    "collapse": "#pragma omp parallel for collapse(2)\n for (int r = 0; r < m; r++) "
                "for (int i = 0; i < n; i++) out[r * n + i] = x[r * n + i] * x[r * n + i];",
    # the row's last element is never read: its gradient is zero, and zeroed with the row
    "short_read": "#pragma omp parallel for\n for (int r = 0; r < m; r++) "
                  "for (int i = 0; i < n - 1; i++) out[r * n + i] = 2.0 * x[r * n + i];",
}

NOT_OWNED = {
    # no parallel loop: nothing proves the rows disjoint
    "serial": "for (int r = 0; r < m; r++) for (int i = 0; i < n; i++) "
              "out[r * n + i] = x[r * n + i];",
    # rows of n read every p: within a row only when p >= n, which nothing shows
    "padded": "#pragma omp parallel for\n for (int r = 0; r < m; r++) "
              "for (int i = 0; i < n; i++) out[r * n + i] = x[r * p + i];",
    # collapse(2) with rows in the other order (column r of row i): not sigma times r * n + i
    "collapse_transposed": "#pragma omp parallel for collapse(2)\n for (int r = 0; r < m; r++) "
                           "for (int i = 0; i < n; i++) out[r * n + i] = x[i * m + r];",
    # the next row read too: two iterations touch one element
    "neighbour": "#pragma omp parallel for\n for (int r = 0; r < m - 1; r++) "
                 "for (int i = 0; i < n; i++) out[r * n + i] = x[r * n + i] * x[(r + 1) * n + i];",
    # the parallel loop runs once per outer iteration: a row zeroed twice would lose the sum
    "nested": "for (int k = 0; k < p; k++) {\n#pragma omp parallel for\n"
              " for (int r = 0; r < m; r++) for (int i = 0; i < n; i++) "
              "out[(k * m + r) * n + i] = x[r * n + i];\n}",
    # every other row
    "step": "#pragma omp parallel for\n for (int r = 0; r < m; r += 2) "
            "for (int i = 0; i < n; i++) out[r * n + i] = x[r * n + i];",
    # an index through a parameter divisor: left out (see rows._row)
    "divisor": "#pragma omp parallel for\n for (int r = 0; r < m; r++) "
               "for (int i = 0; i < n; i++) out[r * n + i] = x[r * n + (i + 1) % n];",
    # from row 1: the rows zeroed would not start the buffer
    "from_one": "#pragma omp parallel for\n for (int r = 1; r < m; r++) "
                "for (int i = 0; i < n; i++) out[r * n + i] = x[r * n + i];",
}


@pytest.mark.parametrize("case", sorted(OWNED))
def test_rows_proved_owned(case):
    d = ad.differentiate(_rows(OWNED[case]), "f", "x")
    assert d.assign_extents == (("x", "m*n"),), dict(d.functions)["f_reverse_sweep_assign"]


@pytest.mark.parametrize("case", sorted(NOT_OWNED))
def test_no_zeroing_where_a_row_is_not_shown_owned(case):
    d = ad.differentiate(_rows(NOT_OWNED[case]), "f", "x")
    assert d.assign_extents in ((), (("x", ""),))
    assert not ZERO_ROW.search(dict(d.functions).get("f_reverse_sweep_assign", ""))


def _rownorm(rows_of=lambda x: x.shape[0]):
    return torchclad.function(ROWNORM, "rownorm", inputs=["x", "w"],
                              outputs={"out": lambda x, w: (x.numel(),)},
                              sizes={"m": lambda x, w: rows_of(x),
                                     "n": lambda x, w: x.shape[1]})


def _reference(x, w, g, m):
    x = x.detach().clone().requires_grad_(True)
    w = w.detach().clone().requires_grad_(True)
    xm = x[:m]
    out = xm * torch.rsqrt((xm * xm).mean(-1, keepdim=True) + 1e-5) * w
    out.reshape(-1).backward(g[:m * x.shape[1]])
    return x.grad, w.grad


def test_user_kernel_takes_it_and_matches_torch_after_backward():
    f = _rownorm()
    kop = ops.kernel_op(f)
    assert kop.fast is not None, "torchclad._C_dispatch is not built (make install builds it)"
    before = kop.fast.stats()["assigning_sweep"]
    for k in range(4):   # heap-sized, recycled buffers: a row left unzeroed would show
        x = torch.randn(48, 70, dtype=torch.float64, requires_grad=True)
        w = torch.randn(70, dtype=torch.float64, requires_grad=True)
        g = torch.randn(48 * 70, dtype=torch.float64) * (k + 1)
        keep = g.clone()
        f(x, w).backward(g)
        assert torch.equal(g, keep)
        gx, gw = _reference(x, w, g, 48)
        torch.testing.assert_close(x.grad, gx, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(w.grad, gw, rtol=1e-12, atol=1e-12)
    assert kop.fast.stats()["assigning_sweep"] - before == 4
    x = torch.randn(5, 7, dtype=torch.float64, requires_grad=True)
    w = torch.randn(7, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(f, (x, w))


def test_rows_beyond_the_extent_come_out_zero():
    """m = rows - 1: the sweep zeroes and fills m rows; the bridge zero-fills the buffer (it
    has more elements than m * n), so the last row's gradient is 0, not garbage."""
    f = _rownorm(lambda x: x.shape[0] - 1)
    kop = ops.kernel_op(f)
    before = kop.fast.stats()["assigning_sweep"]
    for _ in range(3):
        x = torch.randn(40, 64, dtype=torch.float64, requires_grad=True)
        w = torch.randn(64, dtype=torch.float64, requires_grad=True)
        g = torch.randn(40 * 64, dtype=torch.float64) + 3
        f(x, w).backward(g)
        gx, gw = _reference(x, w, g, 39)
        torch.testing.assert_close(x.grad[:39], gx[:39], rtol=1e-12, atol=1e-12)
        assert torch.equal(x.grad[39], torch.zeros(64, dtype=torch.float64))
        torch.testing.assert_close(w.grad, gw, rtol=1e-12, atol=1e-12)
    assert kop.fast.stats()["assigning_sweep"] - before == 3


def test_short_rows_leave_the_unread_element_zero():
    src = _rows(OWNED["short_read"])
    f = torchclad.function(src, "f", inputs=["x"], outputs={"out": lambda x: (x.numel(),)},
                           sizes={"m": lambda x: x.shape[0], "n": lambda x: x.shape[1],
                                  "p": lambda x: 0})
    for _ in range(3):
        x = torch.randn(33, 50, dtype=torch.float64, requires_grad=True)
        g = torch.randn(33 * 50, dtype=torch.float64) - 2
        f(x).backward(g)
        want = 2.0 * g.reshape(33, 50)
        want[:, -1] = 0
        assert torch.equal(x.grad, want)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_same_bits_at_any_thread_count(threads):
    torch.manual_seed(3)
    x = torch.randn(64, 96, dtype=torch.float64)
    w = torch.randn(96, dtype=torch.float64)
    g = torch.randn(64 * 96, dtype=torch.float64)
    f = _rownorm()
    saved = torch.get_num_threads()
    try:
        grads = []
        for t in (1, threads):
            torch.set_num_threads(t)
            a, b = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
            f(a, b).backward(g)
            grads.append((a.grad, b.grad))
    finally:
        torch.set_num_threads(saved)
    assert torch.equal(grads[0][0], grads[1][0]) and torch.equal(grads[0][1], grads[1][1])


# llm.c's layout: a collapse(2) nest over (b, t), a row of C channels each
BT_ROWS = r"""
void scale_rows(double* out, const double* inp, int B, int T, int C) {
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            const double* x = inp + b * T * C + t * C;
            double* o = out + b * T * C + t * C;
            double s = 0;
            for (int i = 0; i < C; i++) s += x[i] * x[i];
            for (int i = 0; i < C; i++) o[i] = x[i] * s;
        }
    }
}
"""


def test_collapsed_rows_are_owned_and_match_torch():
    d = ad.differentiate(BT_ROWS, "scale_rows", "inp")
    assert d.assign_extents == (("inp", "B*T*C"),)
    f = torchclad.function(BT_ROWS, "scale_rows", inputs=["inp"],
                           outputs={"out": lambda x: (x.numel(),)},
                           sizes={"B": lambda x: x.shape[0], "T": lambda x: x.shape[1],
                                  "C": lambda x: x.shape[2]})
    kop = ops.kernel_op(f)
    before = kop.fast.stats()["assigning_sweep"]
    for _ in range(3):
        x = torch.randn(5, 12, 40, dtype=torch.float64, requires_grad=True)
        g = torch.randn(5 * 12 * 40, dtype=torch.float64)
        f(x).backward(g)
        r = x.detach().clone().requires_grad_(True)
        (r * (r * r).sum(-1, keepdim=True)).reshape(-1).backward(g)
        torch.testing.assert_close(x.grad, r.grad, rtol=1e-12, atol=1e-12)
    assert kop.fast.stats()["assigning_sweep"] - before == 3


# ---- the placement check after the passes (rows.placed), on small IR bodies

def _ir_rows(before_zero=(), zero_first=True, outer=False):
    from torchclad.engine import ir
    from torchclad.engine.reverse import rows
    P = ir.Type("double", 1, real=True)
    d, n, z = ir.Var("_d_x", P, 0), ir.Var("n", ir.INT, 7), ir.Var("_t9", ir.LONG, 0)
    one = lambda v: ir.Assign("+=", v, ir.Const("1", v.type))
    below = lambda v, k: ir.Binary("<", v, ir.Const(k, v.type), ir.BOOL)
    zero = ir.Loop((ir.Decl(z, ir.Const("0", ir.LONG)),), below(z, "4"), (one(z),),
                   ir.Block((ir.Assign("=", ir.Index(d, z, ir.DOUBLE),
                                       ir.Const("0", ir.DOUBLE)),)))
    add = ir.Assign("+=", ir.Index(d, n, ir.DOUBLE), ir.Const("1", ir.DOUBLE))
    stmts = list(before_zero) + ([zero, add] if zero_first else [add, zero])
    loop = ir.Loop((ir.Decl(n, ir.Const("0", ir.INT)),), below(n, "8"), (one(n),),
                   ir.Block(tuple(stmts)))
    if outer:
        k = ir.Var("k", ir.INT, 8)
        loop = ir.Loop((ir.Decl(k, ir.Const("0", ir.INT)),), below(k, "2"), (one(k),),
                       ir.Block((loop,)))
    row = rows.Row("_t9", (), (), (7,), 1)
    return rows.placed([loop], "_d_x", row), add


def test_placement_check_accepts_a_zeroing_loop_heading_the_row_loop():
    assert _ir_rows()[0]


def test_placement_check_refuses_what_a_pass_could_have_moved():
    _, add = _ir_rows()
    assert not _ir_rows(zero_first=False)[0]        # an addition before the zeroing
    assert not _ir_rows(before_zero=[add])[0]        # likewise, earlier in the body
    assert not _ir_rows(outer=True)[0]               # the row loop inside another loop


def test_a_misplaced_zeroing_falls_back_to_the_zero_filled_variant(monkeypatch):
    from torchclad.engine.reverse import rows
    monkeypatch.setattr(rows, "placed", lambda body, root, row: False)
    d = ad.differentiate(ROWNORM, "rownorm", ["x", "w"])
    assert d.assign_extents == (("x", ""), ("w", ""))
    assert not ZERO_ROW.search(dict(d.functions)["rownorm_reverse_sweep_assign"])


# ---- the zeroing folded into the row's first pass (first_pass.fold_zeroing)

FOLDED = {
    "row": OWNED["row"],
    "collapse": OWNED["collapse"],     # rows of one element: `_d_x[...] += v` itself
    # an optional pointer: the loop is versioned on its null test (opt/unswitch.py), and the
    # first pass of each version assigns
    "versioned": "#pragma omp parallel for\n for (int r = 0; r < m; r++) "
                 "for (int i = 0; i < n; i++) "
                 "out[r * n + i] = x[r * n + i] * (w != nullptr ? w[i] : 2.0);",
}

KEPT = {
    "short_read": OWNED["short_read"],  # the pass stops before the row's last element
    # the first pass adds under a branch: the elements it skips keep their zero
    "branch": "#pragma omp parallel for\n for (int r = 0; r < m; r++) "
              "for (int i = 0; i < n; i++) { if (x[r * n + i] > 0) "
              "out[r * n + i] = x[r * n + i] * x[r * n + i]; else out[r * n + i] = 0.0; }",
}


def _src(body: str) -> str:
    return _rows(body, "const double* w, int m, int n, int p")


@pytest.mark.parametrize("case", sorted(FOLDED))
def test_the_first_pass_over_a_row_assigns_it(case):
    d = ad.differentiate(_src(FOLDED[case]), "f", "x")
    sweep = dict(d.functions)["f_reverse_sweep_assign"]
    assert d.assign_extents == (("x", "m*n"),)
    assert not ZERO_ROW.search(sweep) and ASSIGNED.search(sweep), sweep
    assert not re.search(r"_d_x\[[^\]]*\] \+= ", sweep), sweep    # no pass adds after it


@pytest.mark.parametrize("case", sorted(KEPT))
def test_the_zeroing_stays_where_the_first_pass_may_skip_an_element(case):
    d = ad.differentiate(_src(KEPT[case]), "f", "x")
    sweep = dict(d.functions)["f_reverse_sweep_assign"]
    assert d.assign_extents == (("x", "m*n"),)
    assert ZERO_ROW.search(sweep) and not ASSIGNED.search(sweep), sweep


@pytest.mark.parametrize("case", sorted(FOLDED) + sorted(KEPT))
def test_uninitialised_rows_come_out_right(case):
    """The bridge hands the assigning sweep an uninitialised buffer (torch.empty); filled
    with garbage first, every element must still come out as the finite differences say."""
    f = torchclad.function(_src({**FOLDED, **KEPT}[case]), "f", inputs=["x", "w"],
                           outputs={"out": lambda x, w: (x.numel(),)},
                           sizes={"m": lambda x, w: x.shape[0], "n": lambda x, w: x.shape[1],
                                  "p": lambda x, w: 0})
    kop = ops.kernel_op(f)
    before = kop.fast.stats()["assigning_sweep"]
    for k in range(3):
        x = torch.randn(9, 35, dtype=torch.float64, requires_grad=True)
        w = torch.randn(35, dtype=torch.float64, requires_grad=True)
        g = torch.randn(9 * 35, dtype=torch.float64) * (k + 1)
        y = f(x, w)
        # freed NaN blocks of the gradient's size: the allocator hands them out next
        for _ in range(4):
            torch.full((9 * 35,), float("nan"), dtype=torch.float64).sum()
        y.backward(g)
        assert torch.isfinite(x.grad).all()
    assert kop.fast.stats()["assigning_sweep"] - before == 3
    x = torch.randn(4, 7, dtype=torch.float64, requires_grad=True)
    w = torch.randn(7, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(f, (x, w))


def _ir_fold(lo="0", hi="4", shift=0, extra=(), op="+=", sigma="4"):
    """The sweep `for n < 8 { zero row n of 4; for (int i = lo; i < hi; i += 1) { extra;
    _d_x[4 * n + i + shift] op 1; } }` and the same after first_pass.fold_zeroing."""
    from torchclad.engine import ir
    from torchclad.engine.reverse import first_pass, rows
    P = ir.Type("double", 1, real=True)
    d, n, z = ir.Var("_d_x", P, 0), ir.Var("n", ir.INT, 7), ir.Var("_t9", ir.LONG, 0)
    i = ir.Var("i", ir.INT, 9)
    c = lambda k, t=ir.INT: ir.Const(str(k), t)
    one = lambda v: ir.Assign("+=", v, c(1, v.type))
    row = ir.Binary("*", c(4, ir.LONG), ir.Cast(n, ir.LONG), ir.LONG)
    zero = ir.Loop((ir.Decl(z, c(0, ir.LONG)),), ir.Binary("<", z, c(sigma, ir.LONG), ir.BOOL),
                   (one(z),),
                   ir.Block((ir.Assign("=", ir.Index(d, ir.Binary("+", row, z, ir.LONG),
                                                     ir.DOUBLE), c(0, ir.DOUBLE)),)))
    at = ir.Binary("+", ir.Binary("*", c(4), n, ir.INT), i, ir.INT)
    if shift:
        at = ir.Binary("+", at, c(shift), ir.INT)
    add = ir.Assign(op, ir.Index(d, at, ir.DOUBLE), c(1, ir.DOUBLE))
    first = ir.Loop((ir.Decl(i, c(lo)),), ir.Binary("<", i, c(hi), ir.BOOL), (one(i),),
                    ir.Block(tuple(extra) + (add,)))
    loop = ir.Loop((ir.Decl(n, c(0)),), ir.Binary("<", n, c(8), ir.BOOL), (one(n),),
                   ir.Block((zero, first)))
    r = rows.Row("_t9", (), (), (7,), 1)
    return [loop], first_pass.fold_zeroing([loop], "_d_x", r)


def _folded(**kw) -> bool:
    from torchclad.engine.emit.cpp import block_text
    before, after = _ir_fold(**kw)
    text = block_text(after)
    assert (after == before) == ("_t9" in text)
    return after != before


def test_fold_takes_a_pass_over_the_whole_row():
    assert _folded()


def test_fold_refuses_a_pass_that_may_miss_or_add_twice():
    from torchclad.engine import ir
    assert not _folded(hi="3")                 # misses the last element
    assert not _folded(lo="1")                 # misses the first
    assert not _folded(shift=1)                # the next row's first element
    assert not _folded(op="-=")
    assert not _folded(sigma="5")              # a row wider than the pass
    assert not _folded(extra=(ir.If(ir.Const("true", ir.BOOL), ir.Block((ir.Break(),))),))
