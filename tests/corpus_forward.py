"""The forward-mode variant of the AD corpus (tests/corpus): every kernel's generated
`f_pushforward` and `f_pullback_pushforward` against finite differences.

For one case and one variant (g++ -O level × engine analyses on/off) the harness differentiates
the kernel with `modes=("reverse", "forward", "second")`, appends an extern "C" wrapper calling
`f_pullback`, `f_pushforward` and `f_pullback_pushforward` on raw buffers, compiles it with the
machinery of tests/corpus_harness.py (batched builds, forked runs) and checks, for a random
direction v on the `wrt` parameters (seeded by the case name):

1. forward: the tangents of the result and of the output arrays equal the central difference
   of the primal along v (the primal compiled alone, from the kernel source) -- or, where the
   case gives the exact gradient instead (kinks, NaN guards, deliberately scaled custom
   pullbacks), `dy * dresult + <seed, doutputs> = <expected gradient, v>` (the JVP/VJP
   identity); inputs come back untouched;
2. second (forward over reverse): the tangents of the adjoints equal the central difference of
   the generated pullback along v (with the case's seeds), and the tangents of the outputs the
   difference of the outputs it writes. Cases that sit on a kink have no second derivative
   there (SECOND_UNDEFINED, with the reason); a scaled custom pullback is smooth, and its
   second derivative is that of the pullback as written.
"""

from __future__ import annotations

import ctypes
import time
import zlib

import numpy as np

import corpus_harness as H

#: cases whose point has no second derivative (the pullback jumps there): name -> why
SECOND_UNDEFINED = {
    "abp05_max_tie": "max/min of equal arguments: the pullback jumps across the tie",
    "abp05_fabs_zero": "fabs at 0: the pullback jumps from -1 to 1",
    "abp05_relu_zero": "relu at 0: the pullback jumps from 0 to 1",
    "abp06_guarded_log": "log/sqrt guarded by x > 0 at x = 0: the pullback jumps",
}


#: every case in every mode: the corpus has no case forward mode refuses (the refusals left,
#: mutual recursion and a stale global tangent, are tested in tests/test_corpus_forward.py)
MODES = ("reverse", "forward", "second")


def _cast(sig, scalar, base, pointer, slot, k) -> str:
    t = sig.scalar(base, scalar)
    return f"({t}*){slot}[{k}]" if pointer else f"*({t}*){slot}[{k}]"


def forward_wrapper(sig, scalar: str, d, prefix: str) -> str:
    """extern "C" entry points of f_pushforward and f_pullback_pushforward on void** slots:
    a = arguments, t = f_pushforward's tangents, d = adjoints, s = second-order tangents."""
    by_name = {p.name: p for p in sig.params}
    ret = sig.ret
    void = ret == "void"
    # (the tangent of a reference parameter is a pointer, like its adjoint)
    tang = "".join(", " + _cast(sig, scalar, by_name[w].base,
                                by_name[w].pointer or by_name[w].reference, "t", k)
                   for k, w in enumerate(d.tangents))
    push = H._call(sig, scalar, sig.fn + "_pushforward") + tang + ")"
    push_body = f"{push}; return 0.0;" if void else f"return (double)({push}).pushforward;"
    adj = list(d.adjoints)
    dargs = "".join(f", ({sig.scalar(by_name[w].base, scalar)}*)dv[{k}]" for k, w in enumerate(adj))
    seeded = d.return_type.differentiable         # an integer result: no seed
    dy = f", ({sig.scalar(ret, scalar)})dy" if seeded else ""
    n, seed = len(sig.params), 1 if seeded else 0
    second = []
    for k, i in enumerate(d.second_mask):
        if i < n:
            p = sig.params[i]
            second.append(_cast(sig, scalar, p.base, p.pointer or p.reference, "s", k))
        elif i < n + seed:       # the seed's tangent, passed as a double
            second.append(f"({sig.scalar(ret, scalar)})*(double*)s[{k}]")
        else:
            second.append(f"({sig.scalar(by_name[adj[i - n - seed]].base, scalar)}*)s[{k}]")
    pbp = H._call(sig, scalar, sig.fn + "_pullback_pushforward") + dy + dargs + \
        "".join(", " + x for x in second) + ")" if "pullback_pushforward" in d.kinds else ""
    pb = H._call(sig, scalar, sig.fn + "_pullback") + dy + dargs + ")"
    return (H.primal_wrapper(sig, scalar, prefix)
            + f"TCC_EXPORT double {prefix}_push(void** a, void** t) {{ {push_body} }}\n"
            + f"TCC_EXPORT void {prefix}_pullback(void** a, double dy, void** dv) {{ {pb}; }}\n"
            + f"TCC_EXPORT void {prefix}_pbpush(void** a, double dy, void** dv, void** s) "
              f"{{ {pbp}; }}\n")


class ForwardSession(H.Session):
    """The corpus session, building forward-mode derivatives instead."""

    def _differentiate(self, case, analyses: bool):
        from torchclad.engine import DiffError, Options, differentiate

        path = H.KERNELS / case.file
        t0 = time.perf_counter()
        try:
            return differentiate(path.read_text(), case.fn, case.wrt, filename=str(path),
                                 options=Options(analyses=analyses),
                                 modes=MODES)
        except DiffError as e:
            raise H.CorpusFailure("diff-error", f"DiffError: {e}") from None
        except Exception as e:
            raise H.CorpusFailure("diff-error", f"engine raised {type(e).__name__}: {e}") from None
        finally:
            self.engine_seconds += time.perf_counter() - t0

    def _deriv_unit(self, case, opt: str, analyses: bool) -> H.Unit:
        d = self.derivative(case, analyses)
        sig = self.signature(case)
        tu = H._strip_line_directives(d.translation_unit())
        at = tu.rfind(d.code) if d.code else -1
        first_gen = tu[:at].count("\n") + 1 if at >= 0 else 0
        prefix = self._prefix()
        text = tu + "\n" + forward_wrapper(sig, case.scalar, d, prefix)
        if "namespace clad" in tu:
            # inside the batch's namespace, the kernel's own `clad` namespace (its custom
            # derivatives) would hide the runtime's clad::ValueAndPushforward: build alone
            text = "// ::clad:: at global scope\n" + text
        return H.Unit(("build", case.build_key, opt, analyses), text, prefix, first_gen)

    def forward_run(self, case, opt: str, analyses: bool) -> dict:
        def make():
            built = self.build(case, opt, analyses)
            ref = self.reference(case)
            inp = self.inputs(case)
            d = self.derivative(case, analyses)
            what = f"{case.name} {opt} analyses={'on' if analyses else 'off'} forward"
            return H._in_child(lambda: _execute(built, ref, case, inp, d), what)
        return self._cached(("frun", case.name, opt, analyses), make)


# ---- running ------------------------------------------------------------------------------

def direction(case, inp) -> dict:
    """A random tangent for every wrt buffer (seeded by the case name)."""
    rng = np.random.default_rng(zlib.crc32(("forward " + case.name).encode()))
    out = {}
    for w in inp.wrt:
        if w in inp.aliases or inp.env[w] is None:
            continue
        out[w] = rng.uniform(-1.0, 1.0, inp.env[w].shape)
    return out


def _tangent_buffers(inp, names_, v: dict) -> dict:
    """A tangent buffer per parameter in names_ (v where given, else zeros), aliases shared."""
    bufs = {}
    for w in names_:
        owner = inp.aliases.get(w, w)
        if owner in bufs:
            bufs[w] = bufs[owner]
            continue
        base = inp.env[owner]
        if base is None:
            bufs[w] = bufs[owner] = None
            continue
        t = np.zeros(base.shape, dtype=base.dtype)
        if owner in v:
            t[...] = v[owner].astype(base.dtype)
        bufs[w] = bufs[owner] = t
    return bufs


def _execute(built, ref, case, inp, d) -> dict:
    """In the child: f_pushforward along v, f_pullback_pushforward along v, and the central
    differences of the primal and of the pullback along v."""
    vpp = ctypes.POINTER(ctypes.c_void_p)
    push = built.fn("push", ctypes.c_double, [vpp, vpp])
    pbpush = built.fn("pbpush", None, [vpp, ctypes.c_double, vpp, vpp])
    pullback = built.fn("pullback", None, [vpp, ctypes.c_double, vpp])
    primal = ref.fn("primal", ctypes.c_double, [vpp])
    names = list(inp.env)
    v = direction(case, inp)
    res: dict = {"v": v}

    # 1. forward
    env = inp.copy_env()
    tang_names = list(d.tangents)
    tb = _tangent_buffers(inp, tang_names, v)
    res["dret"] = push(H._ptrs([env[n] for n in names]), H._ptrs([tb[w] for w in tang_names]))
    res["douts"] = {o: tb[o].astype(np.float64) for o in case.outputs if tb.get(o) is not None
                    and inp.env[o].dtype.kind == "f"}
    res["env"] = env

    # finite differences of the primal along v
    def moved(sign: float, h: float) -> dict:
        e = inp.copy_env()
        for w, dv in v.items():
            e[w][...] = (e[w].astype(np.float64) + sign * h * dv).astype(e[w].dtype)
        return e

    scale = max([1.0] + [float(np.max(np.abs(inp.env[w]))) for w in v if inp.env[w].size])
    h = case.fd_h * scale
    if any(inp.env[w].dtype == np.float32 for w in v):
        # a float input moved by less than ~1e-3 is mostly rounding (one direction for every
        # input: the reverse's per-element differences divide by the step actually taken)
        h = max(h, 1e-3 * scale)
    plus, minus = moved(1.0, h), moved(-1.0, h)
    fp = primal(H._ptrs([plus[n] for n in names]))
    fm = primal(H._ptrs([minus[n] for n in names]))
    res["fd_dret"] = (fp - fm) / (2 * h)
    res["fd_douts"] = {o: (plus[o].astype(np.float64) - minus[o].astype(np.float64)) / (2 * h)
                       for o in res["douts"]}

    # 2. forward over reverse
    adj_names = list(d.adjoints)

    def adjoints() -> list:
        out = []
        for w in adj_names:
            buf = inp.env[w]
            out.append(None if buf is None else inp.seeds[w].astype(buf.dtype).copy()
                       if w in inp.seeds else np.zeros(buf.shape, dtype=buf.dtype))
        return out

    n, seed = len(names), 1 if d.return_type.differentiable else 0
    env = inp.copy_env()
    adj = adjoints()
    sec: list = []
    primal_t = _tangent_buffers(inp, names, v)
    for i in d.second_mask:
        if i < n:
            sec.append(primal_t[names[i]])
        elif i < n + seed:
            sec.append(np.zeros(1))
        else:
            a = adj[i - n - seed]
            sec.append(None if a is None else np.zeros(a.shape, dtype=a.dtype))
    pbpush(H._ptrs([env[x] for x in names]), inp.dy, H._ptrs(adj), H._ptrs(sec))
    res["dadj"] = {w: (None if t is None else t.astype(np.float64))
                   for w, t in zip(adj_names, sec[len(sec) - len(adj_names):])}
    # what the pullback leaves in the output arrays (a sweep may restore overwritten values)
    res["pb_douts"] = {o: primal_t[o].astype(np.float64) for o in res["douts"]}

    def pulled(e) -> dict:
        a = adjoints()
        pullback(H._ptrs([e[x] for x in names]), inp.dy, H._ptrs(a))
        out = {w: (None if g is None else g.astype(np.float64)) for w, g in zip(adj_names, a)}
        out.update({("out", o): e[o].astype(np.float64) for o in res["douts"]})
        return out

    gp, gm = pulled(moved(1.0, h)), pulled(moved(-1.0, h))
    res["fd_dadj"] = {w: None if gp[w] is None else (gp[w] - gm[w]) / (2 * h) for w in adj_names}
    res["fd_pb_douts"] = {o: (gp[("out", o)] - gm[("out", o)]) / (2 * h) for o in res["douts"]}
    res["pb_outs"] = {o: env[o].astype(np.float64) for o in res["douts"]}
    return res


def case_void(d) -> bool:
    return d.return_type.base == "void"


# ---- checking -----------------------------------------------------------------------------

def _close(a, b, case, scale: float = 1.0) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and bool(np.all(np.isclose(a, b, rtol=case.rtol * 10,
                                                         atol=case.atol * 10 * scale,
                                                         equal_nan=True)))


def check_forward(session: ForwardSession, case, opt: str, analyses: bool) -> None:
    r = session.forward_run(case, opt, analyses)
    inp = session.inputs(case)
    problems = []
    for name, orig in inp.env.items():
        if name in case.outputs or orig is None or name in inp.scalars:
            continue
        if not H._same_bits(r["env"][name], orig):
            problems.append(f"f_pushforward modified input {name}")
    if case.expected is not None and not case.fd_agrees and "custom derivative" not in case.tags:
        # (a custom pullback is reverse mode's: forward mode differentiates the body, so a
        # deliberately scaled custom pullback's case is judged by finite differences)
        # the exact gradient, through <J v, seeds> = <J^T seeds, v>
        g = H.expected_gradient(case, inp)
        want = sum(float(np.sum(g[w] * r["v"][w])) for w in r["v"] if w in g)
        got = (inp.dy * r["dret"] if inp.dy else 0.0) + sum(
            float(np.sum(inp.seeds[o] * r["douts"][o])) for o in r["douts"] if o in inp.seeds)
        if not _close(got, want, case, 1 + abs(want)):
            problems.append(f"<seed, J v> = {got!r}, <expected gradient, v> = {want!r}")
    else:
        if not case_void(session.derivative(case, analyses)) and \
                not _close(r["dret"], r["fd_dret"], case, 1 + abs(r["fd_dret"])):
            problems.append(f"tangent of the result {r['dret']!r}, finite difference "
                            f"{r['fd_dret']!r}")
        for o, t in r["douts"].items():
            if not _close(t, r["fd_douts"][o], case, 1 + float(np.max(np.abs(t), initial=0))):
                problems.append(f"tangent of {o} {t.tolist()}, finite difference "
                                f"{r['fd_douts'][o].tolist()}")
    if problems:
        raise H.CorpusFailure("wrong-tangent", "\n".join(problems))


def check_second(session: ForwardSession, case, opt: str, analyses: bool) -> None:
    r = session.forward_run(case, opt, analyses)
    problems = []
    for w, t in r["dadj"].items():
        fd = r["fd_dadj"][w]
        if t is None:
            continue
        tol = 1 + float(np.max(np.abs(np.nan_to_num(fd)), initial=0))
        if not _close(t, fd, case, tol):
            problems.append(f"tangent of _d_{w} {t.tolist()}, finite difference of the "
                            f"pullback {fd.tolist()}")
    for o, t in r["pb_douts"].items():
        fd = r["fd_pb_douts"][o]
        finite = np.isfinite(r["pb_outs"][o])    # (a restored NaN has a tangent, no difference)
        t, fd = t[finite], fd[finite]
        if not _close(t, fd, case, 1 + float(np.max(np.abs(t), initial=0))):
            problems.append(f"tangent of {o} (as the pullback leaves it) {t.tolist()}, finite "
                            f"difference {fd.tolist()}")
    if problems:
        raise H.CorpusFailure("wrong-second-derivative", "\n".join(problems))
