"""``make demo``: GELU with an engine-generated gradient, checked against PyTorch.

1. shows the reverse sweep the engine generated for ``csrc/kernels/gelu.cpp``,
2. runs float64 ``torch.autograd.gradcheck`` on ``torchclad.nn.GELU``,
3. compares float32 values and gradients with ``torch.nn.GELU(approximate="tanh")`` and times
   forward + backward of both.
"""

from __future__ import annotations

import re
import statistics
import time

KERNEL = "gelu_forward"
KERNEL_FILE = "gelu.cpp"


def generated_source() -> tuple[str, str]:
    """(text, where it came from): the build's kept translation unit, else a fresh engine run."""
    from torchclad import build

    kept = build.generated_dir() / KERNEL_FILE
    if kept.is_file():
        return kept.read_text(), str(kept)
    from torchclad import ad, kernels

    spec = next(s for s in kernels.KERNELS if s.name == KERNEL)
    src = (kernels.kernel_dir() / spec.file).read_text()
    d = ad.differentiate(src, KERNEL, None if spec.wrt is None else list(spec.wrt))
    return d.code, "torchclad.ad.differentiate (regenerated)"


def function_text(code: str, name: str, max_lines: int = 40) -> str:
    """The definition of ``name`` (with its template header) from C++ ``code``."""
    lines = code.splitlines()
    start = next((i for i, l in enumerate(lines) if re.search(rf"\b{re.escape(name)}\s*\(", l)
                  and not l.lstrip().startswith(("//", "return", "}"))), None)
    if start is None:
        return f"// {name} not found in the generated code"
    if start > 0 and lines[start - 1].lstrip().startswith("template"):
        start -= 1
    end = start
    depth = 0
    opened = False
    for end in range(start, len(lines)):
        depth += lines[end].count("{") - lines[end].count("}")
        opened = opened or "{" in lines[end]
        if opened and depth <= 0:
            break
    body = lines[start:end + 1]
    if len(body) > max_lines:
        body = body[:max_lines] + [f"    ... ({len(body) - max_lines} more lines)"]
    return "\n".join(body)


def _time_fwd_bwd(module, x, grad, reps: int = 30) -> float:
    """Median wall time (ms) of forward + backward."""
    times = []
    for i in range(reps + 5):
        xi = x.detach().requires_grad_(True)
        t0 = time.perf_counter()
        module(xi).backward(grad)
        t1 = time.perf_counter()
        if i >= 5:
            times.append((t1 - t0) * 1e3)
    return statistics.median(times)


def main() -> int:
    import torch

    import torchclad
    import torchclad.nn as tnn

    torch.manual_seed(0)
    print(f"torchclad {torchclad.__version__} demo: GELU (tanh approximation) with a generated gradient")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)\n")

    code, origin = generated_source()
    print(f"1. Generated reverse-mode code for {KERNEL} (from {origin}):\n")
    print(function_text(code, f"{KERNEL}_pullback"))
    print()

    ours = tnn.GELU(approximate="tanh")
    ref = torch.nn.GELU(approximate="tanh")

    x64 = torch.randn(3, 5, 7, dtype=torch.float64, requires_grad=True)
    ok = torch.autograd.gradcheck(ours, (x64,), raise_exception=False)
    print(f"2. float64 torch.autograd.gradcheck on torchclad.nn.GELU, input {tuple(x64.shape)}: "
          f"{'passed' if ok else 'FAILED'}\n")

    B, T, C = 4, 64, 768
    x = torch.randn(B, T, C)
    g = torch.randn(B, T, C)
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = ref(xa), ours(xb)
    ya.backward(g)
    yb.backward(g)
    err_out = (ya - yb).abs().max().item()
    err_grad = (xa.grad - xb.grad).abs().max().item()
    parity = torch.allclose(ya, yb, rtol=1e-4, atol=1e-5) and torch.allclose(
        xa.grad, xb.grad, rtol=1e-4, atol=1e-5)
    t_ref = _time_fwd_bwd(ref, x, g)
    t_ours = _time_fwd_bwd(ours, x, g)

    print(f"3. float32 parity and timing, input (B, T, C) = ({B}, {T}, {C}), "
          f"median of 30 forward+backward runs")
    rows = [
        ("module", "max |Δ| output", "max |Δ| grad", "fwd+bwd ms"),
        ("torch.nn.GELU(tanh)", "(reference)", "(reference)", f"{t_ref:.3f}"),
        ("torchclad.nn.GELU", f"{err_out:.2e}", f"{err_grad:.2e}", f"{t_ours:.3f}"),
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for j, r in enumerate(rows):
        print("   " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                for i, (c, w) in enumerate(zip(r, widths))))
        if j == 0:
            print("   " + "  ".join("-" * w for w in widths))
    print(f"\n   parity (rtol 1e-4, atol 1e-5): {'ok' if parity else 'FAILED'}")
    return 0 if ok and parity else 1


if __name__ == "__main__":
    raise SystemExit(main())
