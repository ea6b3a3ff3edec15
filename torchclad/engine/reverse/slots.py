"""Per-iteration slots of a parallel loop (reverse/omp.py): the scalars and fixed-size local
arrays an iteration saves at its end, kept in `std::vector`s indexed by the iteration number
(arrays at k * n), pushed whole after the forward loop and read back by each iteration's
reverse instead of the tape."""
from __future__ import annotations

from .. import ir, names


def width(d: ir.Decl) -> int:
    """Values a saved local takes in a slot: 1 for a scalar, n for `T a[n]`; 0: not slotted."""
    dims = d.var.type.dims
    if not dims:
        return 1
    return int(dims[0]) if len(dims) == 1 and dims[0].isdigit() else 0


def copy(asm, dst, dst_at, src, src_at, n: int) -> ir.Loop:
    """for (long j = 0; j < n; ++j) dst[dst_at + j] = src[src_at + j];"""
    j = asm.names.fresh(names.SAVED_PREFIX, ir.LONG)
    at = lambda base, e: j if e is None else ir.Binary("+", e, j, ir.LONG)  # noqa: E731
    return ir.Loop((ir.Decl(j, ir.Const("0", ir.LONG)),),
                   ir.Binary("<", j, ir.Const(str(n), ir.LONG), ir.BOOL),
                   (ir.Assign("+=", j, ir.Const("1", ir.INT)),),
                   ir.Block((ir.Assign("=", ir.Index(dst, at(dst, dst_at), dst.type.element()),
                                       ir.Index(src, at(src, src_at), src.type.element())),)))


def slot_vars(asm, saved) -> list:
    out = []
    for d in saved:
        t = d.var.type
        base = "unsigned char" if t.base == "bool" and not t.ptr else \
            ir.Type(t.base, t.ptr, False, (), t.real).spell()
        out.append(ir.Var(asm.names.fresh(names.SAVED_PREFIX, ir.INT).name,
                          ir.Type(base, vector=True, real=t.real and not t.ptr), 0))
    return out


def scaled(total, w: int):
    return total if w == 1 else ir.Binary("*", total, ir.Const(str(w), ir.LONG), ir.LONG)


def from_slots(asm, body, k, slots, saved) -> list:
    """The iteration's reverse reading its saved locals from the slots instead of the tape."""
    slot_of = {d.var.uid: (v, width(d)) for v, d in zip(slots, saved)}
    out = []
    for st in body:
        if isinstance(st, ir.Decl) and isinstance(st.init, ir.TapePop) and \
                st.var.uid in slot_of:
            v = slot_of[st.var.uid][0]
            st = ir.Decl(st.var, ir.Cast(ir.Index(v, k, v.type.element()),
                                         st.var.type.value(), "static"), (), st.loc)
        elif isinstance(st, ir.TapeArray) and st.pop and st.var.uid in slot_of:
            v, w = slot_of[st.var.uid]
            st = copy(asm, st.var, None, v, ir.Binary("*", k, ir.Const(str(w), ir.LONG),
                                                        ir.LONG), w)
        out.append(st)
    return out
