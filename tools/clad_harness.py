#!/usr/bin/env python
"""Run torchclad over the functions Clad's own reverse-mode tests differentiate.

    python tools/clad_harness.py --clad PATH/TO/clad [--only REGEX] [--json out.json] [--md out.md]

PATH is a checkout of https://github.com/vgvassilev/clad (nothing is downloaded and none of
Clad's code is shipped: the harness reads the test files from that checkout at run time).
For every `clad::gradient(f, "args")` in `test/Gradient/<file>.C` (macros expanded by
libclang), the harness finds the values each `execute(...)` call passes (a small evaluator
over `main`'s declarations and assignments), gives the test file's own source (without
`main`) to `torchclad.gradient(source, "f", "args")`, runs it and checks the gradient
against central finite differences of the compiled primal. Each function is:

- correct   every run's gradient matches finite differences (for a function using
            `non_differentiable`: the gradient the test expects Clad to print)
- wrong     some run's gradient does not (finite differences at two steps agree, we do not)
- crash     an internal error, or generated code that does not compile
- refused   a DiffError (the message is kept), or the bridge refuses the signature
- unjudged  the harness could not run it (no values, finite differences unstable)

The test files include Clad's headers; the harness puts a stand-in of its own for
`clad/Differentiator/Differentiator.h` on CPATH (declarations `main` needs, and the few
helpers some custom derivatives call), so the same source compiles for libclang and g++.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field

FILES = ("Gradients", "Loops", "FunctionCalls", "Pointers", "Assignments", "EarlyReturns",
         "Switch", "SwitchInit", "TBRTernary", "UnaryMinus", "CommaOperator",
         "ConditionalOperatorCondition", "TestAgainstDiff", "RecordRestore", "ReverseForw",
         "NonDifferentiable", "constexprTest", "TestTypeConversion")

# A stand-in for Clad's public header: enough for the tests' `main` to parse and for the
# functions before it to compile. Written here, not copied.
MOCK_DIFFERENTIATOR = r"""
#pragma once
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <utility>
namespace clad {
namespace opts {
enum opt { disable_tbr, enable_tbr, disable_va, enable_va, enable_ua, disable_ua,
           use_enzyme, vector_mode, diagonal_only };
}
template <class T> struct array_ref {
  T* ptr = nullptr; std::size_t n = 0;
  array_ref() = default;
  array_ref(T* p, std::size_t k) : ptr(p), n(k) {}
  T& operator[](std::size_t i) const { return ptr[i]; }
  std::size_t size() const { return n; }
};
template <class T, class U> struct ValueAndAdjoint { T value; U adjoint; };
} // namespace clad
#include <torchclad/forward.h>  // clad::ValueAndPushforward (the runtime's)
namespace clad {
namespace custom_derivatives { namespace std {
template <class X, class P, class DX, class DP>
inline ValueAndPushforward<double> pow_pushforward(X x, P p, DX dx, DP dp) {
  double v = ::std::pow((double)x, (double)p);
  double d = (double)p * ::std::pow((double)x, (double)p - 1) * (double)dx;
  if (dp != 0) d += v * ::std::log((double)x) * (double)dp;
  return {v, d};
}
} }
template <class T> void zero_init(T&) {}
struct CladFunctionStub {
  template <class... A> double execute(A&&...) const { return 0; }
  void dump() const {}
  const char* getFunctionName() const { return ""; }
  const char* getCode() const { return ""; }
};
template <opts::opt... O, class F> CladFunctionStub gradient(F, const char* = "") { return {}; }
template <opts::opt... O, class F> CladFunctionStub gradient(F, int) { return {}; }
template <opts::opt... O, class F> CladFunctionStub differentiate(F, const char*) { return {}; }
template <opts::opt... O, class F> CladFunctionStub differentiate(F, int = 0) { return {}; }
template <opts::opt... O, class F> CladFunctionStub hessian(F, const char* = "") { return {}; }
template <opts::opt... O, class F> CladFunctionStub jacobian(F, const char* = "") { return {}; }
}
"""

MOCK_HEADERS = {
    "clad/Differentiator/Differentiator.h": MOCK_DIFFERENTIATOR,
    "clad/Differentiator/STLBuiltins.h": "#pragma once\n",
    "clad/Differentiator/ArrayRef.h": '#pragma once\n#include "Differentiator.h"\n',
}


# ----------------------------------------------------------------------------- requests
@dataclass
class Param:
    name: str
    base: str            # scalar spelling
    pointer: bool        # pointer or array parameter
    reference: bool
    const: bool


@dataclass
class Request:
    file: str
    line: int
    name: str            # as torchclad is asked for it
    kind: str            # "function", "method", "unknown"
    wrt: object          # Clad's args string, an index, or None
    params: list
    runs: list = field(default_factory=list)      # lists of primal argument values
    # Clad's own expected gradient where finite differences are not the oracle (a function
    # using non_differentiable: Clad cuts those derivatives on purpose): (args, values)
    expected: tuple = ()

    @property
    def key(self):
        return (self.file, self.name, str(self.wrt))


def _ci():
    import clang.cindex as ci
    return ci


def write_mocks(root: str) -> str:
    inc = os.path.join(root, "include")
    for rel, text in MOCK_HEADERS.items():
        path = os.path.join(inc, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    return inc


def _system_includes() -> list:
    from torchclad.engine.frontend.parse import system_include_dirs
    out = []
    for d in system_include_dirs():
        out += ["-isystem", d]
    return out


def _expr_kids(c):
    return [x for x in c.get_children() if x.kind.is_expression()]


class Values:
    """A tiny evaluator of the constants `main` builds: literals, arithmetic, arrays with
    brace initialisers, and assignments to variables and elements, in program order."""

    def __init__(self):
        self.env: dict = {}

    def key(self, c):
        ref = c.referenced
        return None if ref is None else (ref.location.line, ref.location.column, ref.spelling)

    def declare(self, d):
        ci = _ci()
        kids = _expr_kids(d)
        t = d.type
        init = self.ev(kids[-1]) if kids else None
        if t.kind == ci.TypeKind.CONSTANTARRAY:
            n = t.element_count
            vals = init if isinstance(init, list) else []
            vals = list(vals) + [0.0] * (n - len(vals))
            if len(vals) > n:
                vals = vals[:n]
            init = vals
        elif t.kind == ci.TypeKind.INCOMPLETEARRAY and isinstance(init, list):
            init = list(init)
        if init is None and t.kind not in (ci.TypeKind.POINTER,):
            init = 0.0
        self.env[(d.location.line, d.location.column, d.spelling)] = init

    def ev(self, c):
        ci = _ci()
        from torchclad.engine.frontend.parse import binary_op, unary_op
        K = ci.CursorKind
        k = c.kind
        kids = _expr_kids(c)
        if k in (K.UNEXPOSED_EXPR, K.PAREN_EXPR, K.CSTYLE_CAST_EXPR, K.CXX_STATIC_CAST_EXPR,
                 K.CXX_FUNCTIONAL_CAST_EXPR):
            return self.ev(kids[-1]) if kids else None
        if k in (K.INTEGER_LITERAL, K.FLOATING_LITERAL):
            toks = [t.spelling for t in c.get_tokens()]
            text = toks[0] if len(toks) == 1 else None
            try:
                return float(int(text.rstrip("uUlL"), 0)) if k == K.INTEGER_LITERAL else \
                    float(text.rstrip("fFlL"))
            except (ValueError, AttributeError):
                return _evaluate(c, k == K.FLOATING_LITERAL)
        if k == K.CXX_BOOL_LITERAL_EXPR:
            return 1.0 if any(t.spelling == "true" for t in c.get_tokens()) else 0.0
        if k == K.STRING_LITERAL:
            text = c.spelling
            return ("str", text[1:-1] if text.startswith('"') else text)
        if k in (K.CXX_NULL_PTR_LITERAL_EXPR, K.GNU_NULL_EXPR):
            return ("null",)
        if k == K.INIT_LIST_EXPR:
            return [self.ev(x) for x in kids]
        if k == K.DECL_REF_EXPR:
            if c.referenced is not None and c.referenced.kind == K.ENUM_CONSTANT_DECL:
                return float(c.referenced.enum_value)
            return self.env.get(self.key(c))
        if k == K.ARRAY_SUBSCRIPT_EXPR:
            base, idx = self.ev(kids[0]), self.ev(kids[1])
            if isinstance(base, list) and isinstance(idx, float) and 0 <= idx < len(base):
                return base[int(idx)]
            return None
        if k == K.UNARY_OPERATOR:
            op = unary_op(c)
            v = self.ev(kids[0]) if kids else None
            if op == "-" and isinstance(v, float):
                return -v
            if op == "+":
                return v
            if op == "&":
                return ("addr", v)
            return None
        if k in (K.BINARY_OPERATOR, K.COMPOUND_ASSIGNMENT_OPERATOR):
            op = binary_op(c)
            if op == "=":
                v = self.ev(kids[1])
                self.assign(kids[0], v)
                return v
            a, b = self.ev(kids[0]), self.ev(kids[1])
            if not (isinstance(a, float) and isinstance(b, float)):
                return None
            try:
                return {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else None}.get(op)
            except ArithmeticError:
                return None
        return None

    def assign(self, lhs, v):
        ci = _ci()
        K = ci.CursorKind
        while lhs.kind in (K.UNEXPOSED_EXPR, K.PAREN_EXPR) and _expr_kids(lhs):
            lhs = _expr_kids(lhs)[0]
        if lhs.kind == K.DECL_REF_EXPR:
            self.env[self.key(lhs)] = v
        elif lhs.kind == K.ARRAY_SUBSCRIPT_EXPR:
            kids = _expr_kids(lhs)
            base = kids[0]
            while base.kind in (K.UNEXPOSED_EXPR, K.PAREN_EXPR) and _expr_kids(base):
                base = _expr_kids(base)[0]
            arr = self.env.get(self.key(base)) if base.kind == K.DECL_REF_EXPR else None
            idx = self.ev(kids[1])
            if isinstance(arr, list) and isinstance(idx, float) and 0 <= idx < len(arr):
                arr[int(idx)] = v


def _evaluate(c, floating: bool):
    """clang's constant evaluation of a literal (one spelled through a macro argument)."""
    from torchclad.engine.frontend.literals import evaluate
    v = evaluate(c, floating)
    return None if v is None else float(v)


def _resolve_fn(c, depth=0):
    """The function a `clad::gradient` first argument names (through pointers, casts,
    variables holding function pointers)."""
    ci = _ci()
    K = ci.CursorKind
    if c is None or depth > 30:
        return None
    if c.kind in (K.DECL_REF_EXPR, K.MEMBER_REF_EXPR, K.OVERLOADED_DECL_REF):
        ref = c.referenced
        if ref is not None and ref.kind in (K.FUNCTION_DECL, K.FUNCTION_TEMPLATE, K.CXX_METHOD):
            return ref.get_definition() or ref
        if ref is not None and ref.kind == K.VAR_DECL:
            kids = _expr_kids(ref)
            return _resolve_fn(kids[-1], depth + 1) if kids else None
    for x in reversed(_expr_kids(c)):
        r = _resolve_fn(x, depth + 1)
        if r is not None:
            return r
    return None


def _params(fn) -> list:
    ci = _ci()
    TK = ci.TypeKind
    out = []
    for p in fn.get_children():
        if p.kind != ci.CursorKind.PARM_DECL:
            continue
        t = p.type
        ref = t.kind in (TK.LVALUEREFERENCE, TK.RVALUEREFERENCE)
        if ref:
            t = t.get_pointee()
        ptr = False
        if t.kind in (TK.POINTER, TK.CONSTANTARRAY, TK.INCOMPLETEARRAY):
            ptr = True
            t = t.get_pointee() if t.kind == TK.POINTER else t.element_type
        const = t.is_const_qualified()
        base = re.sub(r"\bconst\b|\bvolatile\b", "", t.spelling).strip()
        out.append(Param(p.spelling, base, ptr, ref, const))
    return out


def _is_clad(ref, name: str) -> bool:
    if ref is None or ref.spelling != name:
        return False
    p = ref.semantic_parent
    return p is not None and p.spelling == "clad"


def find_requests(path: str, inc: str, fname: str) -> tuple:
    """(requests, main's extent as (start, end) offsets)."""
    ci = _ci()
    K = ci.CursorKind
    from torchclad.toolchain.compiler import runtime_include_dir
    args = ["-x", "c++", "-std=c++17", "-I", inc, "-I", str(runtime_include_dir()),
            "-Wno-everything"] + _system_includes()
    tu = ci.Index.create().parse(path, args=args)
    main_ext = None
    reqs: dict = {}
    by_var: dict = {}
    handled: set = set()
    last_named: dict = {}
    vals = Values()

    def new_request(call):
        kids = list(call.get_children())
        fn = _resolve_fn(kids[1]) if len(kids) > 1 else None
        wrt = None
        if len(kids) > 2:
            w = vals.ev(kids[2])
            if isinstance(w, tuple) and w[0] == "str":
                wrt = w[1]
            elif isinstance(w, float):
                wrt = str(int(w))
        if fn is None:
            r = Request(fname, call.location.line, "?", "unknown", wrt, [])
        else:
            kind = "method" if fn.kind == K.CXX_METHOD else "function"
            name = fn.spelling if kind == "function" else \
                f"{fn.semantic_parent.spelling}::{fn.spelling}"
            r = Request(fname, call.location.line, name, kind, wrt, _params(fn))
        r = reqs.setdefault(r.key, r)
        last_named[r.name] = r
        return r

    def find_gradient(c):
        for x in c.walk_preorder():
            if x.kind == K.CALL_EXPR and _is_clad(x.referenced, "gradient"):
                return x
        return None

    def record(req, args):
        n = len(req.params)
        if req.kind == "method":
            args = args[1:]        # the object comes first
        req.runs.append([vals.ev(a) for a in args[:n]])

    def var_of(c):
        while c is not None and c.kind != K.DECL_REF_EXPR:
            kids = list(c.get_children())
            c = kids[0] if kids else None
        return None if c is None else vals.key(c)

    def walk(c):
        k = c.kind
        if k == K.VAR_DECL:
            call = find_gradient(c)
            if call is not None:
                handled.add(call.hash)
                by_var[(c.location.line, c.location.column, c.spelling)] = new_request(call)
            vals.declare(c)
            return
        if k == K.CALL_EXPR:
            if _is_clad(c.referenced, "gradient") and c.hash not in handled:
                handled.add(c.hash)
                new_request(c)
                return
            kids = list(c.get_children())
            if c.spelling == "execute" and kids:
                req = by_var.get(var_of(kids[0]))
                if req is not None:
                    record(req, kids[1:])
                return
            ref = c.referenced
            if ref is not None and ref.kind == K.FUNCTION_DECL and \
                    c.spelling.endswith("_grad") and ref.get_definition() is None:
                # Gradients.C calls the generated f_grad Clad declares: f_grad(x, y, &dx, &dy)
                req = last_named.get(c.spelling[:-len("_grad")])
                if req is not None:
                    record(req, kids[1:])
                return
            if c.spelling == "run_gradient" and len(kids) > 1:
                req = by_var.get(var_of(kids[1]))
                if req is not None:
                    record(req, kids[2:])
                return
        if k in (K.BINARY_OPERATOR,) and c.kind.is_expression():
            vals.ev(c)
            return
        for x in c.get_children():
            walk(x)

    for top in tu.cursor.get_children():
        if top.location.file is None or os.path.abspath(top.location.file.name) != \
                os.path.abspath(path):
            continue
        if top.kind == K.FUNCTION_DECL and top.spelling == "main" and top.is_definition():
            main_ext = (top.extent.start.offset, top.extent.end.offset)
        walk(top)
    return list(reqs.values()), main_ext


def torchclad_source(text: str, main_ext) -> str:
    """The test file as a user would hand it to torchclad: without `main` (which drives
    Clad's API) and without Clad's test utilities."""
    if main_ext is not None:
        b = text.encode()
        text = (b[:main_ext[0]] + b"\n" + b[main_ext[1]:]).decode()
    return re.sub(r'#\s*include\s*"\.\./TestUtils\.h"', "", text)


# ----------------------------------------------------------------------------- judging
@dataclass
class Result:
    file: str
    name: str
    wrt: object
    category: str
    message: str = ""
    runs: int = 0
    seconds: float = 0.0
    line: int = 0


def _default(p: Param, rng):
    if p.pointer:
        return [float(x) for x in rng.uniform(0.5, 1.5, 8)]
    if p.base in ("bool",):
        return 1.0
    if _is_float(p.base):
        return float(rng.uniform(0.5, 1.5))
    return 3.0


def _is_float(base: str) -> bool:
    return base in ("float", "double", "long double") or len(base) == 1


def _dtype(base: str):
    import torch
    return {"float": torch.float32, "double": torch.float64, "long double": torch.float64,
            "int": torch.int32, "long": torch.int64, "unsigned": torch.int32,
            "unsigned int": torch.int32, "bool": torch.bool, "short": torch.int16,
            "size_t": torch.int64, "char": torch.int8}.get(base, torch.float64)


def _call_args(req: Request, run: list, rng) -> list:
    import torch
    out = []
    for p, v in zip(req.params, run + [None] * (len(req.params) - len(run))):
        if isinstance(v, tuple) and v[0] == "addr":
            v = v[1] if isinstance(v[1], list) else [v[1]] if v[1] is not None else None
        if isinstance(v, tuple) and v[0] == "null":
            out.append(None)
            continue
        if isinstance(v, tuple) and v[0] == "str":
            out.append(v[1])
            continue
        if v is None or (isinstance(v, list) and any(not isinstance(x, float) for x in v)):
            v = _default(p, rng)
        if p.pointer:
            vals = v if isinstance(v, list) else [v]
            out.append(torch.tensor(vals, dtype=_dtype(p.base)))
        elif isinstance(v, list):
            out.append(v[0] if v else 0.0)
        elif _is_float(p.base):
            out.append(float(v))
        else:
            out.append(int(v))
    return out


def _shifted(args: list) -> list:
    """The floating arguments moved off the integers the tests use: the k-th number by
    0.0731 * (1 + 0.37 k), so that differences between them move too."""
    import torch
    out, k = [], 0
    for a in args:
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            n = a.numel()
            steps = torch.tensor([0.0731 * (1 + 0.37 * (k + j)) for j in range(n)],
                                 dtype=a.dtype).reshape(a.shape)
            out.append(a + steps)
            k += n
        elif isinstance(a, float):
            out.append(a + 0.0731 * (1 + 0.37 * k))
            k += 1
        else:
            out.append(a)
    return out


def _primal(g, args):
    """A callable running the compiled primal on (a copy of) args; returns (ret, arrays)."""
    import torch
    k = g._k
    tensors = {p.name: a for p, a in zip(k.params, args) if isinstance(a, torch.Tensor)}
    scalar = k.pick_scalar(tensors)
    fn = k.binding("", scalar)

    def run(values):
        bufs, call = {}, []
        for p, a in zip(k.params, values):
            if isinstance(a, str) and p.pointer:      # a C string: its bytes and the NUL
                a = torch.tensor(list(a.encode()) + [0], dtype=torch.uint8)
            if isinstance(a, torch.Tensor):
                bufs[p.name] = a.detach().clone()
                call.append(bufs[p.name].data_ptr())
            elif a is None:
                call.append(0)
            elif k.is_float(p):
                call.append(float(a))
            else:
                call.append(int(a))
        return fn(*call), bufs
    return run, scalar


def judge_run(g, req: Request, args: list, rng) -> tuple:
    """(ok, message) of one run against central finite differences."""
    import numpy as np
    import torch
    k = g._k
    run, scalar = _primal(g, args)
    single = scalar == "float" or any(
        p.base == "float" for p in k.params if not p.pointer and p.base != "void")
    seeds = {}
    if k.void:
        for w in k.adjoints:
            p = k.by_name[w]
            if p.pointer:
                a = args[k.params.index(p)]
                seeds[w] = torch.tensor(rng.uniform(-1, 1, a.numel()), dtype=a.dtype)
    grads = g(*args, grad_outputs=dict(seeds))

    def objective(values):
        ret, bufs = run(values)
        total = 0.0 if ret is None or k.void else float(ret)
        for w, s in seeds.items():
            total += float((bufs[w].double() * s.double()).sum())
        return total

    f0 = objective(args)

    def moved(i, j, delta):
        a2 = list(args)
        x = args[i]
        if isinstance(x, torch.Tensor):
            xx = x.clone()
            xx.view(-1)[j] += delta
            a2[i] = xx
        else:
            a2[i] = float(x) + delta
        return objective(a2)

    bad, kinks = [], 0
    for w, got in zip(g.wrt, grads):
        i = [p.name for p in k.params].index(w)
        x = args[i]
        n = x.numel() if isinstance(x, torch.Tensor) else 1
        xs = x.view(-1).tolist() if isinstance(x, torch.Tensor) else [float(x)]
        ours = got.double().reshape(-1).numpy() if isinstance(got, torch.Tensor) else \
            np.array([float(got)])
        rtol, atol = (3e-2, 3e-3) if single else (1e-4, 1e-6)
        for j in range(n):
            est, smooth = [], True
            for h_rel in ((1e-3, 1e-4) if single else (1e-6, 1e-7)):
                h = h_rel * max(1.0, abs(xs[j]))
                up, down = moved(i, j, h), moved(i, j, -h)
                est.append((up - down) / (2 * h))
                fwd, bwd = (up - f0) / h, (f0 - down) / h
                # one-sided differences that disagree: a kink or a jump at this point
                if abs(fwd - bwd) > (0.1 if single else 1e-3) * max(1.0, abs(fwd), abs(bwd)):
                    smooth = False
            scale = max(1.0, abs(est[0]))
            if any(abs(ours[j] - e) <= atol * scale + rtol * abs(e) for e in est):
                continue
            if not smooth:
                kinks += 1
                continue
            if abs(est[0] - est[1]) > 10 * (atol * scale + rtol * abs(est[0])):
                bad.append(("unstable", f"d/d{w}[{j}]: finite differences unstable "
                            f"({est[0]} vs {est[1]}); ours {ours[j]}"))
                continue
            bad.append(("wrong", f"d/d{w}[{j}]: ours {ours[j]:.6g} vs finite differences "
                        f"{est[0]:.6g}"))
    if any(b[0] == "wrong" for b in bad):
        return "wrong", "; ".join(m for c, m in bad if c == "wrong")
    if bad:
        return "unjudged", "; ".join(m for _, m in bad)
    if kinks:
        return "kink", f"{kinks} derivative(s) at a kink or jump of the function not judged"
    return "correct", ""


def in_child(thunk, req: Request, timeout: float = 900.0) -> Result:
    """thunk() (a Result) in a forked child: generated code that crashes or hangs fails this
    function ("crash"), not the harness."""
    import pickle
    import select
    import signal
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                      # the child
        os.close(r)
        try:
            res = thunk()
        except BaseException as e:    # noqa: BLE001
            res = Result(req.file, req.name, req.wrt, "crash", f"{type(e).__name__}: {e}")
        with os.fdopen(w, "wb") as fh:
            pickle.dump(res, fh)
        os._exit(0)
    os.close(w)
    t0, data = time.time(), b""
    with os.fdopen(r, "rb") as fh:
        while True:
            left = timeout - (time.time() - t0)
            ready, _, _ = select.select([fh], [], [], max(left, 0))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return Result(req.file, req.name, req.wrt, "crash",
                              f"timed out after {timeout:.0f}s", line=req.line)
            chunk = fh.read1(1 << 16) if hasattr(fh, "read1") else fh.read()
            if not chunk:
                break
            data += chunk
    _, status = os.waitpid(pid, 0)
    if data:
        return pickle.loads(data)
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
    return Result(req.file, req.name, req.wrt, "crash",
                  f"the process died (signal {sig}) running the generated code",
                  seconds=time.time() - t0, line=req.line)


def classify(e: BaseException) -> tuple:
    """(category, message) of an exception met building a gradient."""
    from torchclad.engine import DiffError
    if isinstance(e, DiffError):
        msg = str(e)
        if not re.match(r"^[^:\s]+:\d+:\d+: ", msg):
            msg = "(no file:line:col) " + msg
        return "refused", msg
    if isinstance(e, TypeError) and ("kernel.cpp" in str(e) or "no torch dtype" in str(e)
                                     or "not supported" in str(e)) or \
            type(e).__name__ == "GlueError":
        return "refused", f"bridge: {e}"
    return "crash", f"{type(e).__name__}: {e}"[:2000]


_TEST_FUNC = re.compile(r"TEST_FUNC\((\w+),\s*([^)]*)\)\s*//\s*CHECK-EXEC:\s*([-\d. ]+)")


def clad_expected(source: str) -> dict:
    """name -> (args, gradient) from a test's `TEST_FUNC(name, args...) // CHECK-EXEC: values`
    lines, for files whose functions use `non_differentiable` (there Clad's printed values,
    not finite differences of the primal, are what the attribute must give)."""
    if "non_differentiable" not in source:
        return {}
    return {m.group(1): ([float(a) for a in m.group(2).split(",")],
                         [float(v) for v in m.group(3).split()])
            for m in _TEST_FUNC.finditer(source)}


def judge_expected(req: Request, g, res: Result) -> Result:
    """Judge against Clad's printed gradient (two decimals, as the test prints it)."""
    args, want = req.expected
    got = g(*args)
    ok = len(got) == len(want) and all(abs(float(a) - b) <= 0.006 for a, b in zip(got, want))
    res.category = "correct" if ok else "wrong"
    res.message = (f"against Clad's expected output {want} at {args} (non_differentiable)"
                   + ("" if ok else f": ours {[round(float(a), 4) for a in got]}"))
    return res


def judge_gradient(req: Request, g, seed: int) -> Result:
    """Run a built gradient at the test's values and judge it."""
    import numpy as np
    res = Result(req.file, req.name, req.wrt, "unjudged", line=req.line)
    if req.expected:
        return judge_expected(req, g, res)
    t0 = time.time()
    rng = np.random.default_rng(seed)
    runs = req.runs or [[]]
    outcomes = []
    for run in runs:
        try:
            args = _call_args(req, run, rng)
            got = judge_run(g, req, args, rng)
            if got[0] == "kink":
                # the test's values sit on a kink or jump (integers at a branch's edge):
                # judge the same function next to them as well
                again = judge_run(g, req, _shifted(args), rng)
                if again[0] == "correct":
                    got = ("correct", got[1] + "; correct at values moved off them")
                elif again[0] == "wrong":
                    got = ("wrong", "at values moved off the test's: " + again[1])
            outcomes.append(got)
        except Exception as e:  # noqa: BLE001
            outcomes.append(("crash", f"running it: {type(e).__name__}: {e}"))
    res.runs = len(runs)
    if all(c == "kink" for c, _ in outcomes):
        outcomes = [("unjudged", m) for _, m in outcomes]
    for cat in ("wrong", "crash", "unjudged"):
        msgs = [m for c, m in outcomes if c == cat]
        if msgs:
            res.category, res.message = cat, " | ".join(msgs)[:2000]
            break
    else:
        res.category = "correct"
        notes = [m for c, m in outcomes if c in ("kink", "correct") and m]
        if not req.runs:
            notes.append("no execute() in the test: judged at default values")
        res.message = "; ".join(notes)
    res.seconds = time.time() - t0
    return res


def judge(req: Request, source: str, filename: str, seed: int) -> Result:
    """One function the way a user meets it: `torchclad.gradient(source, name, wrt)`."""
    import torchclad
    res = Result(req.file, req.name, req.wrt, "unjudged", line=req.line)
    if req.kind == "unknown":
        res.message = "the harness could not tell which function clad::gradient names"
        return res
    t0 = time.time()
    try:
        g = torchclad.gradient(source, req.name, req.wrt)
    except Exception as e:      # noqa: BLE001 - the harness classifies every failure
        res.category, res.message = classify(e)
        res.seconds = time.time() - t0
        return res
    return judge_gradient(req, g, seed)


def judge_file(reqs: list, source: str, file_index: int) -> list:
    """Every function of one test file, built together: one engine for the file (what
    `torchclad.gradient` runs, request by request), one module for all its derivatives (the
    toolchain `torchclad.gradient` calls, given them all; a function whose derivative does
    not compile is then built alone to tell which), each run in a child process."""
    from torchclad import engine, toolchain
    out: dict = {}
    derivs: dict = {}
    eng = None
    try:
        eng = engine.Engine(source, "kernel.cpp")
    except Exception as e:      # noqa: BLE001
        cat, msg = classify(e)
        return [Result(r.file, r.name, r.wrt, cat, msg, line=r.line) for r in reqs]
    for j, req in enumerate(reqs):
        if req.kind == "unknown":
            out[j] = Result(req.file, req.name, req.wrt, "unjudged",
                            "the harness could not tell which function clad::gradient names",
                            line=req.line)
            continue
        try:
            derivs[j] = eng.derive(req.name, req.wrt)
            toolchain.make_tu(derivs[j])       # what the bindings refuse, without a build
        except Exception as e:  # noqa: BLE001
            derivs.pop(j, None)
            cat, msg = classify(e)
            out[j] = Result(req.file, req.name, req.wrt, cat, msg, line=req.line)
    modules: dict = {}
    names = [d.name for d in derivs.values()]
    batch = [j for j, d in derivs.items() if names.count(d.name) == 1]
    if len(batch) > 1:
        try:
            mod = toolchain.load([derivs[j] for j in batch])
            modules.update(dict.fromkeys(batch, mod))
        except Exception:       # noqa: BLE001 - some derivative does not compile: one by one
            pass
    for j, d in derivs.items():
        if j in modules:
            continue
        try:
            modules[j] = toolchain.load(d)
        except Exception as e:  # noqa: BLE001
            out[j] = Result(reqs[j].file, reqs[j].name, reqs[j].wrt, "crash",
                            f"{type(e).__name__}: {e}"[:2000], line=reqs[j].line)
    for j in sorted(modules):
        req, d, mod = reqs[j], derivs[j], modules[j]

        def run(req=req, d=d, mod=mod, j=j):
            from torchclad.bridge.gradient import Gradient
            try:
                g = Gradient(d, mod)
            except Exception as e:  # noqa: BLE001
                cat, msg = classify(e)
                return Result(req.file, req.name, req.wrt, cat, msg, line=req.line)
            return judge_gradient(req, g, 1000 * file_index + j)
        out[j] = in_child(run, req)
    return [out[j] for j in range(len(reqs))]


# ----------------------------------------------------------------------------- reports
CATEGORIES = ("correct", "wrong", "crash", "refused", "unjudged")


def reason_of(msg: str) -> str:
    m = re.sub(r"^\S+:\d+:\d+: ", "", msg)
    m = re.sub(r"'[^']*'", "'…'", m)
    return m.split(";")[0][:110]


def markdown(results: list, clad_rev: str) -> str:
    counts = {c: sum(1 for r in results if r.category == c) for c in CATEGORIES}
    out = ["# torchclad over Clad's reverse-mode tests", "",
           "Written by `python tools/clad_harness.py --clad PATH --md FILE` (Clad " +
           clad_rev + ").", "",
           "Every function the 18 test files below differentiate with `clad::gradient(f, "
           "\"args\")` is given, with the test's own argument string, to torchclad: one "
           "engine per file (what `torchclad.gradient` runs), the file's derivatives built in "
           "one module (at -O0: the harness judges values), each run at the values the test's "
           "`execute` calls pass and compared with central finite differences of the compiled "
           "primal (two steps). Where the test's values sit on a kink or a jump of the "
           "function (branches on integers), it is judged next to them as well. Functions "
           "using `non_differentiable` are judged against the gradient the test expects "
           "Clad to print (its `CHECK-EXEC` line): that attribute cuts derivatives on "
           "purpose, so finite differences of the primal are not the oracle. Categories: "
           "correct, wrong (finite differences at two steps agree, we do not), crash (an "
           "internal error, generated code that does not compile, or a run that dies), "
           "refused (a DiffError naming the construct with file:line:col, or the bindings "
           "refusing a signature), unjudged (no judgement possible at any of those values).", "",
           f"{len(results)} functions: " + ", ".join(f"**{counts[c]} {c}**" for c in CATEGORIES),
           "", "| file | correct | wrong | crash | refused | unjudged |", "|---|---|---|---|---|---|"]
    for f in FILES:
        rs = [r for r in results if r.file == f]
        if rs:
            out.append(f"| {f} | " + " | ".join(str(sum(1 for r in rs if r.category == c))
                                                 for c in CATEGORIES) + " |")
    for cat in ("wrong", "crash", "unjudged", "refused"):
        rs = [r for r in results if r.category == cat]
        if not rs:
            continue
        out += ["", f"## {cat} ({len(rs)})", ""]
        for r in sorted(rs, key=lambda r: (r.file, r.line)):
            msg = r.message.replace("\n", " ")[:400]
            out.append(f"- `{r.file}.C {r.name}` (wrt {r.wrt!r}): {msg}")
    return "\n".join(out) + "\n"


def compiler_wrapper(opt: str) -> str:
    """A g++ that builds at `opt` instead of the package's -O3 (a quicker harness)."""
    import shlex
    import shutil
    cxx = os.environ.get("CXX") or shutil.which("g++") or "g++"
    # a fixed path: the build cache keys on the compiler's argv
    root = os.path.join(tempfile.gettempdir(), f"clad_harness_{os.getuid()}")
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, f"cxx{opt}")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n"
                "for a in \"$@\"; do [ \"$a\" = -O3 ] && a=" + shlex.quote(opt) + "; "
                "set -- \"$@\" \"$a\"; shift; done\n"
                "exec " + shlex.quote(cxx) + " \"$@\"\n")
    os.chmod(path, 0o755)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clad", required=True, help="path to a checkout of vgvassilev/clad")
    ap.add_argument("--only", default="", help="regex over 'File.C name'")
    ap.add_argument("--files", default=",".join(FILES))
    ap.add_argument("--json", default="")
    ap.add_argument("--md", default="")
    ap.add_argument("--list", action="store_true", help="only list the requests found")
    ap.add_argument("--per-function", action="store_true",
                    help="call torchclad.gradient for each function (one build each) instead "
                         "of building a file's derivatives together")
    ap.add_argument("--engine-only", action="store_true",
                    help="only run the engine (refused or not), nothing compiled")
    ap.add_argument("--opt", default="-O0",
                    help="optimisation level the kernels are built with (the package's "
                         "-O3 is replaced: the harness judges values, not speed)")
    args = ap.parse_args(argv)
    gdir = os.path.join(args.clad, "test", "Gradient")
    if not os.path.isdir(gdir):
        print(f"no test/Gradient in {args.clad}: pass a checkout of vgvassilev/clad",
              file=sys.stderr)
        return 2
    root = tempfile.mkdtemp(prefix="clad_harness_")
    inc = write_mocks(root)
    from torchclad.toolchain.compiler import runtime_include_dir
    runtime = str(runtime_include_dir())     # the mock includes torchclad/forward.h
    os.environ["CPATH"] = inc + os.pathsep + runtime + (os.pathsep + os.environ["CPATH"]
                                 if os.environ.get("CPATH") else "")
    if args.opt != "-O3":
        os.environ["CXX"] = compiler_wrapper(args.opt)
    rev = "unknown revision"
    head = os.path.join(args.clad, ".clad_revision")
    if os.path.exists(head):
        rev = open(head).read().strip()
    results = []
    for i, f in enumerate(x for x in args.files.split(",") if x):
        path = os.path.join(gdir, f + ".C")
        text = open(path).read()
        reqs, main_ext = find_requests(path, inc, f)
        source = torchclad_source(text, main_ext)
        reqs = [r for r in reqs if not args.only or re.search(args.only, f"{f}.C {r.name}")]
        expected = clad_expected(text)           # from main's TEST_FUNC lines
        for r in reqs:
            r.expected = expected.get(r.name, ())
        if not (args.list or args.engine_only or args.per_function):
            t0 = time.time()
            for r in judge_file(reqs, source, i):
                results.append(r)
                print(f"[{r.category:8}] {f}.C {r.name} {r.message[:300]}", flush=True)
            print(f"  ({f}.C: {time.time() - t0:.0f}s)", flush=True)
            continue
        for j, req in enumerate(reqs):
            tag = f"{f}.C {req.name}"
            if args.list:
                print(f"{tag} wrt={req.wrt!r} params={[p.name for p in req.params]} "
                      f"runs={req.runs}")
                continue
            if args.engine_only:
                from torchclad.engine import DiffError, differentiate
                try:
                    differentiate(source, req.name, req.wrt)
                    print(f"[engine ok] {tag}")
                except DiffError as e:
                    print(f"[refused  ] {tag} {e}")
                except Exception as e:  # noqa: BLE001
                    print(f"[crash    ] {tag} {type(e).__name__}: {e}")
                continue
            r = in_child(lambda: judge(req, source, f + ".C", 1000 * i + j), req)
            results.append(r)
            print(f"[{r.category:8}] {tag} ({r.seconds:.1f}s) {r.message[:300]}", flush=True)
    if args.list or args.engine_only:
        return 0
    counts = {c: sum(1 for r in results if r.category == c) for c in CATEGORIES}
    print("\n" + ", ".join(f"{counts[c]} {c}" for c in CATEGORIES) + f" ({len(results)} functions)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([r.__dict__ for r in results], fh, indent=1, default=str)
    if args.md:
        with open(args.md, "w") as fh:
            fh.write(markdown(results, rev))
    return 0


if __name__ == "__main__":
    sys.exit(main())
