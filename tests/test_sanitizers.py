"""Generated code under AddressSanitizer + UndefinedBehaviorSanitizer (issue "Reliability and security").

- The AD corpus (tests/corpus): every case differentiated, built by the corpus harness with
  ``-fsanitize=address,undefined -fno-sanitize-recover=all`` at -O1 (engine analyses on), and run
  through both generated paths (combined ``f_pullback``; split ``f_reverse_forw`` +
  ``f_reverse_sweep``) on malloc'd buffers: no report. ``python tests/corpus_harness.py --sanitize
  [case ...]`` is the same run by hand.
- The built-in kernels' generated derivatives (torchclad/_generated/<unit>.cpp), compiled with the
  same flags behind a ctypes stand-in of ``torchclad._C`` (tests/sanitize_builtins.py), driven by
  every torchclad.nn module through the real bridge: no report, results equal to torch.
- Self-tests: the same plumbing reports planted bugs (heap overflow, signed overflow, a stack
  address used after return, a generated pullback run past the end of its arrays).

Each run happens in a subprocess whose environment preloads g++'s libasan
(``corpus_harness.sanitizer_env``), as instrumented code loaded into an uninstrumented Python needs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus_harness as H  # noqa: E402
import sanitize_builtins as SB  # noqa: E402

TESTS = H.TESTS
REPO = H.REPO


def _sanitized(argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    env = H.sanitizer_env()
    env["OMP_NUM_THREADS"] = "2"
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH", "")) if x)
    return subprocess.run([sys.executable, *argv], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def _no_ld_preload() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}


PLANTED = r"""
#include <climits>
extern "C" double sum_ok(const double* x, int n) {
  double s = 0;
  for (int i = 0; i < n; i++) s += x[i];
  return s;
}
extern "C" double sum_past_end(const double* x, int n) {
  double s = 0;
  for (int i = 0; i <= n; i++) s += x[i];
  return s;
}
extern "C" int add(int a, int b) { return a + b; }
static double* kept;
extern "C" __attribute__((noinline)) void keep_local() { double local[4] = {1, 2, 3, 4}; kept = local; }
extern "C" double read_kept() { return kept[1]; }
"""

PLANTED_DRIVER = r"""
import ctypes, sys
from pathlib import Path
import numpy as np
sys.path.insert(0, {tests!r})
import corpus_harness as H
assert H.asan_loaded(), "libasan not preloaded"
lib = ctypes.CDLL({so!r})
lib.sum_ok.restype = lib.sum_past_end.restype = lib.read_kept.restype = ctypes.c_double
x = np.arange(8.0)
p = ctypes.c_void_p(x.ctypes.data)
runs = {{
    "clean": lambda: lib.sum_ok(p, 8),
    "heap": lambda: lib.sum_past_end(p, 8),
    "signed": lambda: lib.add(2**31 - 1, 1),
    "stack": lambda: (lib.keep_local(), lib.read_kept()),
}}
for name, fn in runs.items():
    report, _ = H.sanitized_child(fn, name, Path({log!r}) / (name + ".log"))
    first = next((l for l in report.splitlines() if H.SANITIZER_REPORT.search(l)), "")
    print(f"{{name}}: {{first or 'no report'}}")
"""


def test_planted_bugs_are_reported(tmp_path):
    """The plumbing the corpus run uses (flags, preloaded runtime, per-child stderr, report
    detection) catches each kind of bug and nothing in correct code."""
    src, so = tmp_path / "planted.cpp", tmp_path / "planted.so"
    src.write_text(PLANTED)
    subprocess.run([H.CXX, "-shared", "-fPIC", H.SANITIZE_OPT, *H.SANITIZE_FLAGS, str(src), "-o", str(so)],
                   check=True, env=_no_ld_preload())
    driver = PLANTED_DRIVER.format(tests=str(TESTS), so=str(so), log=str(tmp_path))
    proc = _sanitized(["-c", driver], timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    got = dict(line.split(": ", 1) for line in proc.stdout.splitlines() if ": " in line)
    assert got.get("clean") == "no report", proc.stdout
    assert "heap-buffer-overflow" in got.get("heap", ""), proc.stdout
    assert "signed integer overflow" in got.get("signed", ""), proc.stdout
    assert "stack-use-after-return" in got.get("stack", ""), proc.stdout


def test_corpus_under_asan_and_ubsan():
    """Every corpus case, pullback and split, built with SANITIZE_FLAGS: 0 reports, 0 errors."""
    proc = _sanitized([str(TESTS / "corpus_harness.py"), "--sanitize"], timeout=1800)
    out = proc.stdout
    m = re.search(r"sanitized variants: (\d+) clean, (\d+) with reports, (\d+) errors, (\d+) rejected", out)
    assert m, f"no summary (rc {proc.returncode}):\n{out[-6000:]}\n{proc.stderr[-3000:]}"
    clean, reports, errors, rejected = map(int, m.groups())
    problems = "\n".join(line for line in out.splitlines() if line.startswith(("REPORT", "ERROR", "    ")))
    assert reports == 0 and errors == 0 and proc.returncode == 0, problems[-12000:]
    # every case ran both paths, except those the engine rejects outright (test_corpus fails those)
    assert clean + rejected == 2 * len(H.CASES), out[-2000:]


@pytest.fixture(scope="module")
def sanitized_builtins(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sanitized_builtins")
    SB.build(out)
    return out


def test_builtin_derivatives_under_asan_and_ubsan(sanitized_builtins):
    """torchclad/_generated/*.cpp with SANITIZE_FLAGS, every module forward + backward through the
    bridge (float32/float64, zero-size and odd shapes, fused GPT-2): 0 reports, torch's results."""
    proc = _sanitized([str(TESTS / "sanitize_builtins.py"), str(sanitized_builtins)], timeout=900)
    report = proc.stderr if H.SANITIZER_REPORT.search(proc.stderr) else ""
    assert not report, report[-12000:]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    m = re.search(r"^OK (\d+) checks", proc.stdout, re.M)
    assert m and int(m.group(1)) >= 50, proc.stdout


def test_builtin_planted_overflow_is_reported(sanitized_builtins):
    """The stand-in really runs instrumented generated code: a pullback told its arrays are one
    element longer than they are is caught."""
    proc = _sanitized([str(TESTS / "sanitize_builtins.py"), str(sanitized_builtins), "--plant"], timeout=300)
    assert "heap-buffer-overflow" in proc.stderr, proc.stdout + proc.stderr[-3000:]
    assert "gelu_forward_pullback" in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode != 0
