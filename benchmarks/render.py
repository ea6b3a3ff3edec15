"""Render benchmarks/results.json as benchmarks/results.md (tables) and benchmarks/results.png
(speed-up over PyTorch eager per case).

    python benchmarks/render.py            # re-render both from results.json
    python benchmarks/render.py --print    # and print the markdown

:func:`markdown` returns the text (the README's performance section can include results.md,
or call this). Every bench_*.py re-renders after writing its section, so results.md always
matches results.json. Missing sections and cases that did not run are shown as such.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import results as res  # noqa: E402

IMPL_NAMES = {"eager": "PyTorch eager", "torchclad": "torchclad", "torchclad_fused": "torchclad fused",
              "torchclad_fused_mkl": "torchclad fused, MKL's GEMMs", "compile": "torch.compile"}


def _t(row: dict | None, series: str, key: str = "min") -> float | None:
    if not row or row.get("status") != "ok":
        return None
    return (row.get("times") or {}).get(series, {}).get(key)


def _cell(row: dict | None, series: str) -> str:
    if row is None:
        return "not run"
    if row.get("status") == "unavailable":
        return "n/a yet"
    if row.get("status") != "ok":
        return "error"
    return res.fmt_ms(_t(row, series))


def _div(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def rel(row: dict | None, base: dict | None, phase: str) -> float | None:
    """Time of ``row`` relative to ``base`` for ``phase``: the median per-round ratio when the
    two ran interleaved, else the ratio of their minima."""
    if not row or row.get("status") != "ok":
        return None
    vs = (row.get("vs_eager") or {}).get(phase)
    if vs:
        return vs["median"]
    return _div(_t(row, phase), _t(base, phase))


def _rel_cell(row: dict | None, base: dict | None, phase: str) -> str:
    r = rel(row, base, phase)
    if r is None:
        return "–"
    vs = (row.get("vs_eager") or {}).get(phase)
    if vs:
        return f"{r:.2f}× <sub>({vs['p10']:.2f}–{vs['p90']:.2f})</sub>"
    return f"{r:.2f}×†"


def _table(header: list[str], rows: list[list[str]], align: str | None = None) -> str:
    align = align or "l" + "r" * (len(header) - 1)
    sep = ["---:" if a == "r" else ":---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _notes(rows: list[dict], key: str = "kernel") -> list[str]:
    out = []
    for r in rows:
        if r.get("status") in ("unavailable", "error"):
            what = r.get(key) or r.get("case") or "?"
            impl = f" ({IMPL_NAMES.get(r.get('impl'), r.get('impl'))})" if r.get("impl") else ""
            reason = (r.get("reason") or r.get("error") or "").replace("\n", " ")
            out.append(f"- {what}{impl}: {r['status']} — {reason[:300]}")
    return out


# ---- sections


def _q(q: dict | None, small: bool = True) -> str:
    if not q:
        return "–"
    text = f"{q['median']:.2f}×"
    return text + (f" <sub>({q['p10']:.2f}–{q['p90']:.2f})</sub>" if small else "")


def reverse_table(sec: dict) -> str:
    rows = []
    target = sec.get("target_sweep_over_hand", 1.3)
    for r in sec.get("rows", []):
        if r.get("status") != "ok":
            rows.append([r.get("label", r["kernel"]), r["status"], *[""] * 8])
            continue
        t, q, m = r["times"], r["ratios"], r["min_ratios"]
        main = m["sweep_over_hand"]
        mark = " ✓" if main <= target else " ✗"
        tape = r["tape_bytes"]
        rows.append([
            r["label"], res.fmt_ms(t["forward"]["min"]), res.fmt_ms(t["hand_backward"]["min"]),
            res.fmt_ms(t["reverse_sweep"]["min"]), f"**{main:.2f}×**{mark}",
            _q(q.get("sweep_over_hand")),
            res.fmt_x(m["sweep_over_forward"]), res.fmt_x(m["hand_over_forward"]),
            res.fmt_x(m["reverse_forw_over_forward"]), res.fmt_x(m["fwd_bwd_generated_over_hand"]),
            _tape(tape),
        ])
    head = ["kernel", "forward ms", "hand bwd ms", "generated sweep ms", "**sweep / hand**",
            "per-round median (p10–p90)", "sweep / fwd", "hand / fwd", "reverse_forw / fwd",
            "fwd+bwd: generated / hand", "tape"]
    text = _table(head, rows)
    notes = _notes(sec.get("rows", []))
    return text + ("\n\n" + "\n".join(notes) if notes else "")


def _by(rows: list[dict], *keys: str) -> dict:
    return {tuple(r.get(k) for k in keys): r for r in rows}


def components_table(sec: dict) -> str:
    rows = sec.get("rows", [])
    idx = _by(rows, "case", "impl")
    out = []
    for case in sec.get("cases", []):
        e, t, c = (idx.get((case, i)) for i in ("eager", "torchclad", "compile"))
        size = next((x.get("size") for x in (e, t, c) if x and x.get("size")), "")
        rss = " / ".join(f"{x['rss_peak_mb']:.0f}" if x and x.get("rss_peak_mb") else "–"
                         for x in (e, t, c))
        faults = " / ".join(f"{x['minflt_per_step']:.0f}" if x and "minflt_per_step" in x
                            else "–" for x in (e, t, c))
        out.append([case, size, _cell(e, "fwd_bwd"), _cell(t, "fwd_bwd"), _cell(c, "fwd_bwd"),
                    _rel_cell(t, e, "fwd_bwd"), _rel_cell(c, e, "fwd_bwd"),
                    _rel_cell(t, e, "forward"), _rel_cell(t, e, "backward"),
                    f"{c['first_call_s']:.1f}" if c and c.get("status") == "ok" else "–", rss,
                    faults])
    head = ["component", "size", "eager ms", "torchclad ms", "compile ms",
            "**torchclad / eager**", "compile / eager", "fwd: torchclad / eager",
            "bwd: torchclad / eager", "compile 1st call s", "peak RSS MB (eager / tc / compile)",
            "page faults / step (eager / tc / compile)"]
    notes = _notes(rows, "case")
    return _table(head, out) + ("\n\n" + "\n".join(notes) if notes else "")


def _has_fused_mkl(rows: list) -> bool:
    """Whether the GPT-2 run measured the fused model on MKL's GEMMs too (bench_gpt2's
    torchclad_fused_mkl: only where torchclad picks another BLAS)."""
    return any(r.get("impl") == "torchclad_fused_mkl" for r in rows)


def gpt2_table(sec: dict) -> str:
    rows = sec.get("rows", [])
    idx = _by(rows, "case", "impl")
    impls = ["eager", "torchclad", "torchclad_fused", "compile"]
    mkl = _has_fused_mkl(rows)
    out = []
    for case in sec.get("cases", []):
        r = {i: idx.get((case, i)) for i in impls + ["torchclad_fused_mkl"]}
        cells = [case]
        cells += [_cell(r[i], "fwd_bwd") for i in impls]
        cells += [_rel_cell(r[i], r["eager"], "fwd_bwd") for i in ("torchclad", "torchclad_fused", "compile")]
        if mkl:
            cells.append(_rel_cell(r["torchclad_fused_mkl"], r["eager"], "fwd_bwd"))
        cells += [_cell(r[i], "step") for i in ("eager", "torchclad", "torchclad_fused")]
        diffs = [x.get("loss_diff_vs_eager") for x in r.values() if x and x.get("loss_diff_vs_eager") is not None]
        cells.append(f"{max(diffs):.1e}" if diffs else "–")
        cells.append(" / ".join(
            f"{r[i]['rss_peak_mb'] / 1024:.2f}" if r[i] and r[i].get("rss_peak_mb") else "–"
            for i in impls))
        out.append(cells)
    head = ["case", "eager ms", "torchclad ms", "fused ms", "compile ms", "**torchclad / eager**",
            "**fused / eager**", "compile / eager"]
    head += ["fused with MKL's GEMMs / eager"] if mkl else []
    head += ["step eager ms", "step torchclad ms", "step fused ms", "max loss diff",
             "peak RSS GB (eager / tc / fused / compile)"]
    notes = _notes(rows, "case")
    return _table(head, out) + ("\n\n" + "\n".join(notes) if notes else "")


def gemm_floor_table(sec: dict) -> str:
    """The step's sgemms replayed alone (bench_gpt2.gemm_floor) against each implementation's
    fwd+bwd: how far above the matmul bound each one runs."""
    floors = sec.get("gemm_floor") or {}
    idx = _by(sec.get("rows", []), "case", "impl")
    impls = ["eager", "torchclad", "torchclad_fused", "compile"]
    if _has_fused_mkl(sec.get("rows", [])):
        impls.append("torchclad_fused_mkl")
    out = []
    for case in sec.get("cases", []):
        f = floors.get(case)
        if not f:
            continue
        ms = 1000 * f["min"]
        cells = [case, f"{f['gflop']:.1f}", f"{ms:.1f}", f"{f['gflop'] / f['min']:.0f}"]
        for i in impls:
            t = _t(idx.get((case, i)), "fwd_bwd")
            q = (f.get("vs_floor") or {}).get(i)
            cells.append((f"{t / f['min']:.2f}×" if t else "–")
                          + (f" <sub>({q['median']:.2f}×: {q['p10']:.2f}–{q['p90']:.2f})</sub>"
                             if q else ""))
        out.append(cells + ["interleaved" if f.get("interleaved") else "alone, after"])
    if not out:
        return ""
    head = ["case", "GFLOP", "sgemm floor ms", "GFLOP/s", "eager / floor", "torchclad / floor",
            "fused / floor", "compile / floor"]
    head += ["fused with MKL's GEMMs / floor"] if "torchclad_fused_mkl" in impls else []
    head += ["floor measured"]
    return _table(head, out)


def traffic_table(sec: dict) -> str:
    """Two bounds per case (bench_traffic.py): this design's (GEMM floor + its non-GEMM passes
    at streaming bandwidth) and any design's (GEMM floor + attention's causal products at the
    floor's GFLOP/s), against eager's and the fused model's fwd+bwd."""
    out = []
    for r in sec.get("rows", []):
        floor, eager, fused = (r.get(k) for k in ("gemm_floor_s", "eager_s", "torchclad_fused_s"))
        if not floor:
            out.append([r["case"], f"{r['traffic_mb']:.0f}"] + ["–"] * 12)
            continue
        bound = floor + r["passes_s"]
        rate = r["gemm_floor_gflop"] / floor  # GFLOP/s
        hard = floor + r["attention_gflop"] / rate
        target = eager / 1.4 if eager else None
        mem = r.get("passes_memory_s")
        out.append([r["case"], f"{r['traffic_mb']:.0f}", f"{r['gb_per_s']:.1f}",
                    res.fmt_ms(r["passes_s"]), res.fmt_ms(floor), res.fmt_ms(bound),
                    f"{fused / bound:.2f}×" if fused else "–",
                    f"{r['working_set_mb']:.0f} MB: {r['gb_per_s_memory']:.1f}" if mem else "–",
                    res.fmt_ms(floor + mem) if mem else "–",
                    f"{fused / (floor + mem):.2f}×" if fused and mem else "–",
                    res.fmt_ms(hard), res.fmt_ms(target),
                    f"{target / bound:.2f}×" if target else "–",
                    f"**{eager / hard:.2f}×**" if eager else "–"])
    head = ["case", "non-GEMM traffic MB", "GB/s", "passes ms", "GEMM floor ms",
            "this design's bound ms", "fused / bound", "working set: GB/s",
            "all passes from memory ms", "fused / that", "any design's bound ms",
            "eager / 1.4 ms", "(eager / 1.4) / this bound", "**eager / any bound**"]
    return _table(head, out)


def blas_table(sec: dict) -> str:
    out = []
    for r in sec.get("rows", []):
        q = r.get("ratio") or {}
        slower = [k for k, v in (r.get("shapes") or {}).items() if v["ratio"] > 1.0]
        out.append([r["case"], str(r["threads"]), f"{r['mkl_ms']:.1f}", f"{r['openblas_ms']:.1f}",
                    f"**{q.get('median', float('nan')):.2f}×** <sub>({q.get('p10', 0):.2f}–"
                    f"{q.get('p90', 0):.2f})</sub>",
                    f"{len(slower)} of {len(r.get('shapes') or {})}"])
    head = ["model", "threads", "MKL ms", "OpenBLAS ms", "**OpenBLAS / MKL**",
            "shapes where OpenBLAS is slower"]
    return _table(head, out)


def build_table(sec: dict) -> str:
    rows = [[r["unit"], ", ".join(r.get("functions", [])), f"{r['generate_s']:.2f}",
             f"{r['compile_s']:.1f}" if r.get("compile_s") is not None else "–"]
            for r in sec.get("rows", [])]
    if sec.get("module_compile_s") is not None:
        rows.append(["`_C_module.cpp`", "module init", "–", f"{sec['module_compile_s']:.1f}"])
    rows.append(["**total**", f"{sec.get('kernels', '?')} kernels in {len(sec.get('rows', []))} units",
                 f"**{sec.get('total_generate_s', 0):.2f}**",
                 f"**{sec.get('total_compile_s', 0):.1f}** (+ link {sec.get('link_s', 0):.1f}; "
                 f"wall {sec.get('compile_wall_s', 0):.0f} with 2 jobs)"])
    text = _table(["unit", "kernels", "engine s", "g++ CPU s"], rows, "llrr")
    if sec.get("error"):
        text += f"\n\n- error: {sec['error'][:400]}"
    return text


def libtorch_table(sec: dict) -> str:
    """torchclad ops in C++ vs LibTorch: CPU time per call, ratios to torchclad."""
    out = []
    for r in sec.get("rows", []):
        im = r.get("impls", {})

        def cell(name: str, ratio: bool = False) -> str:
            s = im.get(name)
            if not s:
                return "–"
            t = s["cpu_s"]["median"]
            tt = f"{t * 1e6:.1f} µs" if t < 1e-3 else f"{t * 1e3:.2f} ms"
            return tt + (f" ({s['vs_torchclad']:.2f}×)" if ratio else "")

        out.append([r["case"], r.get("what", ""), cell("torchclad"), cell("native", True),
                    cell("composed", True)])
    text = _table(["case", "size", "torchclad op", "native LibTorch op", "composed LibTorch ops"],
                  out, "llrrr")
    text += ("\n\nThe ops compiled for this machine's CPU (`-DTORCHCLAD_NATIVE=ON`: -march=native)."
             if sec.get("native") else
             "\n\nThe ops compiled portably (the generated CMakeLists.txt's default: no -march; "
             "`-DTORCHCLAD_NATIVE=ON` compiles them for the building machine's CPU).")
    if sec.get("build_wall_s") is not None:
        text += (f" CMake configure + build of the program (2 ops, the runtime, the "
                 f"benchmark; -j2): {sec['build_wall_s']:.0f} s wall.")
    if sec.get("error"):
        text += f"\n\n- error: {sec['error'][:400]}"
    return text


def higher_order_table(sec: dict) -> str:
    """Generated JVP and HVP vs torch's: median ms per call, median per-round ratio (p10–p90)."""
    idx = _by(sec.get("rows", []), "case", "impl")
    out = []
    for case in sec.get("cases", []):
        e, t = idx.get((case, "eager")), idx.get((case, "torchclad"))
        size = next((x.get("size") for x in (e, t) if x and x.get("size")), "")
        row = [case, size]
        for ph in ("jvp", "hvp", "second"):
            row += [_cell_median(e, ph), _cell_median(t, ph), _rel_cell(t, e, ph)]
        row.append(f"{t['max_rel_err_f32']:.0e}" if t and t.get("status") == "ok" else "–")
        out.append(row)
    head = ["case", "x", "JVP eager ms", "JVP torchclad ms", "**JVP ratio**", "HVP eager ms",
            "HVP torchclad ms", "**HVP ratio**", "double bwd eager ms",
            "double bwd torchclad ms", "double bwd ratio", "f32 rel err"]
    text = _table(head, out, "ll" + "r" * 10)
    notes = _notes(sec.get("rows", []), "case")
    return text + ("\n\n" + "\n".join(notes) if notes else "")


def llmc_table(sec: dict) -> str:
    """llm.c's kernels as written: generated sweep / llm.c's backward, minima and median, what
    became of the forward's OpenMP pragmas (runs before 2026-12-03 did not record it) and how
    many llm.c's backward has."""
    rows, warned = [], []
    for r in sec.get("rows", []):
        omp = r.get("omp")
        par = "–" if omp is None else \
            f"{omp['pragmas']} / {omp['parallel_sweeps']} / {len(omp['warnings'])}"
        hand = "–" if omp is None else str(omp.get("hand_pragmas", "–"))
        label = r.get("label", r.get("kernel", "?"))
        warned += [f"- {label}: {w}" for w in (omp or {}).get("warnings", [])]
        if r.get("status") != "ok":
            rows.append([label, r.get("status", "?"), "", "", "", par, hand])
            continue
        m = r["min_ratios"]["sweep_over_hand"]
        ok = " ✓" if r.get("meets_target") else " ✗"
        rows.append([label, f"**{m:.2f}×**{ok}", _q(r["ratios"].get("sweep_over_hand")),
                     f"≤ {r['target']}×", _tape(r.get("tape_bytes", 0)), par, hand])
    text = _table(["kernel", "generated sweep / llm.c backward", "per-round median", "target",
                   "tape", "OpenMP: forward pragmas / parallel loops in the sweeps / warnings",
                   "pragmas in llm.c's backward"], rows)
    return text + ("\n\nThe engine's OpenMP warnings:\n" + "\n".join(warned) if warned else "")


def _tape(n: int) -> str:
    """A tape's size: bytes, or MB from 64 KiB."""
    return f"{n / 2**20:.2f} MB" if n >= 2**16 else f"{n} B"


def _cell_median(row: dict | None, series: str) -> str:
    if row is None or row.get("status") != "ok":
        return _cell(row, series)
    return res.fmt_ms(_t(row, series, "median"))


def _machine_line(m: dict | None) -> str:
    if not m:
        return ""
    load = m.get("loadavg_at_start")
    return (f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores, {m.get('memory_gb', '?')} GB; "
            f"{m.get('compiler', '?')}; Python {m.get('python', '?')}"
            + (f"; torch {m['torch']}" if m.get("torch") else "")
            + (f"; {m['bench_threads']} thread(s) per case" if m.get("bench_threads") else "")
            + (f"; load average {load[0]:.1f} at start" if load else "")
            + f"; git {m.get('git', '?')}; {m.get('date', '?')}")


def markdown(data: dict[str, Any] | None = None) -> str:
    data = data if data is not None else res.load_results()
    # sections written by another layout version are not rendered (re-run them)
    secs = {k: v for k, v in data.get("sections", {}).items() if v.get("schema") == res.SCHEMA}
    parts = ["# torchclad benchmark results",
             "",
             "Generated by `make bench` (`benchmarks/`); rendered from `benchmarks/results.json` by "
             "`python benchmarks/render.py`. Times are the minimum over the timed repetitions "
             "(ms). Ratios come from ONE run: implementations are measured interleaved, round "
             "by round, and a ratio is the median of the per-round ratios, with the 10th–90th "
             "percentile range in small print († = not interleaved: ratio of minima). Each case "
             "runs at torch's default thread count (*N*thr: the machine's cores, what a user "
             "gets; wall clock) and at one thread (1thr: per core, torch, MKL and OpenMP alike; "
             "process CPU time, which does not count time spent descheduled); each section's "
             "footer gives the load average when it started (the machine is shared). No timing "
             "is asserted anywhere.", ""]

    for key, title, table in _SECTIONS:
        parts += [title, ""]
        parts += _measured(key, secs[key], table) if secs.get(key) else ["(not run yet)", ""]
    return "\n".join(parts)


# What each section measured, above its table ({cxxflags} and {target} from the section).
_INTROS = {
    "reverse_sweep":
        "One C++ program per kernel (`benchmarks/bench_reverse.py`): the engine's translation "
        "unit of the `csrc/kernels/` kernel plus a hand-written llm.c-style backward "
        "(`benchmarks/oracles/`, checked against the generated gradient to 1e-5 relative in "
        "the program), compiled with the flags of the installed built-in kernels as they "
        "run on this CPU (`{cxxflags}`), "
        "at one OpenMP thread (per core: per-call CPU time) and at two (rows marked "
        "*2 threads*: wall time), the four calls interleaved "
        "round by round. The hand-written backwards are serial loops, so at two threads "
        "only the forward and the generated sweep use both cores. "
        "*sweep / hand* is the AD overhead (target ≤ "
        "{target}×), here the ratio of the minima (the "
        "uncontended cost of each single-threaded call); the median of the per-round "
        "ratios is beside it as a check (where the two differ, one of the calls' times was "
        "bimodal between rounds: the 2 vCPUs share host cores with other work). The "
        "hand-written backwards are plain llm.c-style loops, compiled with the same flags. "
        "*reverse_forw / fwd* is the cost of recording the tape in the forward.",
    "components":
        "`torchclad.nn` modules vs `torch.nn` (eager) vs `torch.compile` of the `torch.nn` "
        "module, fwd+bwd with an input that requires grad; one process per implementation, "
        "interleaved (`benchmarks/bench_components.py`); *compile 1st call* includes "
        "compilation (with whatever the inductor cache already holds). Eager attention is "
        "`F.scaled_dot_product_attention(is_causal=True)`. Ratio > 1: slower than eager. "
        "*page faults / step*: the process's minor page faults per timed step, fresh pages "
        "from the kernel (glibc hands freed memory at the top of its heap back once it "
        "exceeds a threshold it adapts to the process's history: a process can fault on "
        "every step or never with the same code, and a faulting one is slower).",
    "gpt2":
        "Forward + backward of three GPT-2 models: the `make demo` size (2 layers, 4 heads, "
        "128 channels, vocabulary 56, B16 T64), nanoGPT's shakespeare-char configuration "
        "(6 layers, 6 heads, 384 channels, vocabulary 65, B8 T256) and GPT-2 small (124M, "
        "B4 T64); each at torch's default thread count (*N*thr = the machine's cores: the "
        "headline) and at one thread (per core). The step adds AdamW. `torchclad` = "
        "`GPT2(config)` (modular: autograd chains the generated sweeps), `fused` = "
        "`GPT2(config, fused=True)` (one generated sweep for the whole model; *fused with "
        "MKL's GEMMs*, where present: the same with `TORCHCLAD_BLAS=mkl`, on a CPU where "
        "torchclad picks numpy's OpenBLAS), eager / "
        "compile = a plain-PyTorch GPT-2 (`benchmarks/reference_models.py`; compile with "
        "`dynamic=True`); same weights, so the first losses agree (*max loss diff*); one "
        "process per implementation, interleaved (`benchmarks/bench_gpt2.py`); with more "
        "than one thread the clock is the wall clock. Ratio > 1: slower than eager.",
    "traffic":
        "What the memory system allows the fused model as it is laid out (one pass per layer "
        "kernel, bias additions and d-bias reductions around the GEMMs, adjoints accumulated and "
        "reset as they are read): the values those non-GEMM passes of one fwd+bwd read and "
        "write, counted by `benchmarks/bench_traffic.py` (`--passes MODEL` lists them), at "
        "this machine's streaming bandwidth (the lowest of torch copy / triad / fill over "
        "24 MB, which the cache holds, at the case's thread count). *bound* = GEMM floor + "
        "passes: no fwd+bwd of this design runs below it. *all passes from memory* = GEMM "
        "floor + the same traffic at the bandwidth over arrays the size of the model's "
        "working set (the fused model's activation arena plus its adjoints): what the passes "
        "cost if none found its data in cache, a pessimistic estimate -- a step of this "
        "design lies between the two where its working set outgrows the cache. *any design's "
        "bound* = GEMM floor + attention's six "
        "products (scores, weighted sum and their adjoints) over the causal half only, at the "
        "floor's GFLOP/s (MKL's large sgemms run near this CPU's peak; attention's smaller "
        "ones do not run faster), with nothing else costing any time: no fwd+bwd that "
        "computes these products runs below it, and *eager / any bound* is more than the "
        "largest speed-up over eager there is (#15 asks 1.4× at the demo and "
        "shakespeare-char sizes). *eager / 1.4* is that target "
        "as a time. The GEMM floor and the eager / fused times are the gpt2 section's (the "
        "run before this one).",
    "blas":
        "The GEMMs of each model's fwd+bwd (forward, d input, d weight of every linear "
        "layer) replayed with torch's BLAS (MKL, `torch.mm`) and with numpy's (OpenBLAS, "
        "`numpy.matmul`), each library in a process of its own, alternating round by round "
        "(`benchmarks/bench_blas.py`); the minimum over each process's replays, the ratio "
        "is the median of the per-round ratios. < 1: OpenBLAS is faster. At two threads numpy runs "
        "OpenBLAS's own thread pool; torchclad calls it single-threaded on a block of each GEMM "
        "per OpenMP thread instead, and the GPT-2 table's *fused with MKL's GEMMs* column "
        "shows what that choice gives the fused model.",
    "build":
        "The engine over `torchclad/builtin/registry.py`'s registry (wall time per kernel file), then "
        "a fresh compile of each unit (kernel + generated derivatives + pybind11 glue) into "
        "a temporary directory with the package's flags, no cache; *g++ CPU s* is each "
        "compiler's CPU time (user + sys), whose sum is what the package's serial build "
        "spends compiling (`benchmarks/bench_build.py`).",
    "higher_order":
        "Forward mode and second order (`benchmarks/bench_higher.py`): `torch.func.jvp` "
        "(the output and J v) and the Hessian-vector product by double backward (`y = f(x)`, "
        "`g = grad(<y, w>, x, create_graph=True)`, `grad(g, x, v)`; *double bwd* is the last "
        "call alone) through `torchclad.nn.LayerNorm` / `GELU(\"tanh\")` -- whose jvp is the "
        "kernel's generated `f_pushforward` and whose double backward is the generated "
        "`f_pullback_pushforward` (forward over reverse) -- against torch's own formulas for "
        "`F.layer_norm` / `F.gelu(approximate=\"tanh\")` (weight and bias frozen). float32; "
        "GELU acts on (B, T, 4C). One process per implementation, interleaved; *N*thr = "
        "torch's default thread count (wall clock), 1thr = one thread (process CPU time). "
        "Times are medians; ratio > 1: slower than eager. *f32 rel err*: torchclad's largest "
        "error against torch ops in float64 (relative to each result's largest element), "
        "checked before timing. The jvp / hvp kernels are compiled on first use without the "
        "CPU-specific flags and libmvec vector math of the installed first-order kernels "
        "(GELU's `tanh` runs scalar), and with more threads than free cores the wall clock "
        "counts OpenMP barriers waiting for descheduled threads (note the load average).",
    "llmc":
        "llm.c's kernels as written (`benchmarks/bench_llmc.py --llmc PATH --write`; "
        "`train_gpt2.c` is read from a checkout at run time, nothing of it is shipped): the "
        "engine's reverse sweep of each forward kernel against llm.c's own hand-written "
        "backward, gradients checked equal first, calls interleaved round by round, compiled "
        "with the installed kernels' flags; at one OpenMP thread (process CPU time) and at two "
        "(wall clock: the generated sweeps run the parallel loops the engine kept from the "
        "forward's pragmas, while llm.c's backwards are serial except `matmul_backward`, "
        "last column). Softmax -> cross-entropy is the two forwards composed in one function, against "
        "llm.c's fused `crossentropy_softmax_backward` (target ≤ 3×). Headline: ratio of "
        "minima; the per-round median beside it.",
    "libtorch":
        "`torchclad aot` ops in a C++ program (`benchmarks/bench_libtorch.py`, kernels from "
        "`examples/libtorch/kernels`): `torchclad_ops::gelu` / `layernorm` (backward: the "
        "generated reverse sweep) against LibTorch's fused op with its hand-written backward "
        "(*native*: `at::gelu(x, \"tanh\")`, `at::layer_norm`) and against the same math in "
        "elementwise LibTorch ops under torch::autograd (*composed*). Median CPU time per call "
        "(forward without grad, or forward + `torch::autograd::grad` of every input), one "
        "thread, implementations interleaved round by round in one process; in brackets the "
        "median per-round ratio to torchclad (> 1: slower than torchclad). The overhead rows "
        "use one element.",
}

_GEMM_FLOOR_INTRO = (
    "The matmul bound: the step's sgemms (forward and backward, attention's excepted) "
    "replayed with `torch.mm` into preallocated buffers, same thread count, in a "
    "process of its own (`bench_gpt2.GemmReplay`), against each implementation's fwd+bwd "
    "minimum. *interleaved*: the replay takes its turn in every round of the table above, "
    "as one more implementation, and its minimum is the floor; in small print the median "
    "of the per-round ratios to it (p10–p90). *alone, after*: measured once after the "
    "rounds (older runs). Anything "
    "that keeps MKL's sgemm runs at or above 1.00× of it, so the speed-up over eager "
    "is bounded by the *eager / floor* column -- where a step comes out below "
    "1.00× (the small sizes), the replay is not a bound: it pays small-matrix "
    "overheads (a call per sgemm from Python) that a whole step amortises. Where torchclad "
    "runs its GEMMs with numpy's OpenBLAS (`torchclad/builtin/blas.py`: on AMD processors) "
    "the floor, MKL's, bounds only *fused with MKL's GEMMs* (`TORCHCLAD_BLAS=mkl`, measured "
    "in the same rounds); the other torchclad columns can run below it.")


def _measured(key: str, sec: dict, table) -> list[str]:
    """A measured section: what was measured, ``table(sec)``, the machine it ran on; GPT-2's
    then the matmul bound."""
    intro = _INTROS[key].format(
        cxxflags=sec.get("cxxflags", "-O3 -std=c++17 -fno-fast-math -fopenmp"),
        target=sec.get("target_sweep_over_hand", 1.3))
    parts = [intro, "", table(sec), "", f"<sub>{_machine_line(sec.get('machine'))}</sub>", ""]
    floor = gemm_floor_table(sec) if key == "gpt2" else ""
    if floor:
        parts += [_GEMM_FLOOR_INTRO, "", floor, ""]
    return parts


# (section key, heading, its table), in the order of results.md
_SECTIONS = (
    ("reverse_sweep", "## AD overhead: generated reverse sweep vs hand-written backward "
                      "(C++, float32)", reverse_table),
    ("components", "## Components: forward + backward (PyTorch modules, CPU, float32)",
     components_table),
    ("gpt2", "## GPT-2 training step: demo size, shakespeare-char, 124M (CPU, float32)",
     gpt2_table),
    ("traffic", "## Memory traffic outside the GEMMs: the bound of the fused model's design",
     traffic_table),
    ("blas", "## Which sgemm: MKL (torch) vs OpenBLAS (numpy) at the models' GEMM shapes",
     blas_table),
    ("build", "## Build: engine generation and compile time of the built-in kernels",
     build_table),
    ("higher_order", "## Forward mode and second order: generated JVP and Hessian-vector "
                     "product vs torch's (CPU, float32)", higher_order_table),
    ("llmc", "## llm.c's kernels as written: generated sweep vs llm.c's backward (C++, "
             "float32)", llmc_table),
    ("libtorch", "## LibTorch C++ ops (`torchclad aot`): per-call overhead and fwd+bwd (CPU, "
                 "float32)", libtorch_table),
)


# ---- figure


def speedups(data: dict) -> list[tuple[str, str, float]]:
    """(case label, impl, eager time / impl time) for every measured case."""
    out = []
    secs = {k: v for k, v in data.get("sections", {}).items() if v.get("schema") == res.SCHEMA}
    for name, impls in (("components", ("torchclad", "compile")),
                        ("gpt2", ("torchclad", "torchclad_fused", "compile"))):
        sec = secs.get(name)
        if not sec:
            continue
        idx = _by(sec.get("rows", []), "case", "impl")
        for case in sec.get("cases", []):
            base = idx.get((case, "eager"))
            label = case if name == "components" else f"GPT-2 {case}"
            for impl in impls:
                r = rel(idx.get((case, impl)), base, "fwd_bwd")
                if r:
                    out.append((label, impl, 1.0 / r))
    return out


def render_png(data: dict, path: Path = res.RESULTS_PNG) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    pts = speedups(data)
    if not pts:
        return False
    cases = list(dict.fromkeys(p[0] for p in pts))
    impls = [i for i in ("torchclad", "torchclad_fused", "compile") if any(p[1] == i for p in pts)]
    val = {(c, i): s for c, i, s in pts}
    width = 0.8 / len(impls)
    fig, ax = plt.subplots(figsize=(max(7, 1.1 * len(cases) + 2), 4.2))
    colors = {"torchclad": "#1f77b4", "torchclad_fused": "#2ca02c", "compile": "#ff7f0e"}
    labelled = set()
    for j, case in enumerate(cases):  # the bars a case has, centred on its tick
        present = [i for i in impls if (case, i) in val]
        for k, impl in enumerate(present):
            x = j + (k - (len(present) - 1) / 2) * width
            y = val[(case, impl)]
            ax.bar([x], [y], width, color=colors[impl],
                   label=None if impl in labelled else IMPL_NAMES[impl])
            labelled.add(impl)
            ax.annotate(f"{y:.2f}", (x, y), ha="center", va="bottom", fontsize=7)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_yscale("log")
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels(cases, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("speed-up over PyTorch eager (fwd+bwd, ×)")
    ax.set_title("torchclad vs PyTorch eager and torch.compile (CPU, 1 thread, float32; "
                 ">1 = faster than eager)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def render_all(data: dict | None = None) -> None:
    data = data if data is not None else res.load_results()
    res.atomic_write(res.RESULTS_MD, markdown(data) + "\n")
    render_png(data)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--print", action="store_true", help="print the markdown too")
    args = ap.parse_args(argv)
    data = res.load_results()
    render_all(data)
    if args.print:
        print(markdown(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
