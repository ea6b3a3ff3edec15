"""Tests of the tape runtime (csrc/runtime/torchclad/tape.h, runtime.h).

Small C++ programs are compiled with g++ into a temporary directory and run;
tape_check.cpp holds the cases (one subcommand each).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
INCLUDE = ROOT / "csrc" / "runtime"
RUNTIME = INCLUDE / "torchclad"
CHECK_SRC = HERE / "tape_check.cpp"

CXX = os.environ.get("CXX", "g++")
BASE_FLAGS = ["-std=c++17", f"-I{INCLUDE}", "-fopenmp", "-pthread"]
WARN_FLAGS = ["-Wall", "-Wextra", "-Werror"]
LIMIT = 64 * 1024  # TORCHCLAD_TAPE_MEMORY_LIMIT used by the offload tests



def compile_cpp(src: Path, out: Path, *flags: str) -> Path:
    cmd = [CXX, *flags, str(src), "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"
    return out


def run(exe: Path, *args: str, env: dict | None = None, timeout: float = 120) -> str:
    full_env = dict(os.environ)
    full_env.pop("TORCHCLAD_TAPE_MEMORY_LIMIT", None)
    full_env.update(env or {})
    proc = subprocess.run(
        [str(exe), *args], capture_output=True, text=True, env=full_env, timeout=timeout
    )
    assert proc.returncode == 0, f"{exe.name} {' '.join(args)}: rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert proc.stdout.startswith("OK"), proc.stdout
    return proc.stdout + proc.stderr


def facts(output: str) -> dict[str, str]:
    return dict(re.findall(r"(\w+)=(\S+)", output))


@pytest.fixture(scope="session")
def build_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("tape_build")


@pytest.fixture(scope="session")
def tape_check(build_dir) -> Path:
    """tape_check built like generated code is: -O2, OpenMP, warnings as errors."""
    return compile_cpp(CHECK_SRC, build_dir / "tape_check", "-O2", *BASE_FLAGS, *WARN_FLAGS)


@pytest.fixture(scope="session")
def tape_check_asan(build_dir) -> Path:
    return compile_cpp(
        CHECK_SRC,
        build_dir / "tape_check_asan",
        "-O1",
        "-g",
        "-fsanitize=address,undefined",
        "-fno-sanitize-recover=all",
        "-fno-omit-frame-pointer",
        *BASE_FLAGS,
    )


def assert_instrumented(exe: Path, *symbols: str) -> None:
    """The sanitizer runtime is linked in, so its reports (the markers tests look for) can
    appear at all."""
    nm = subprocess.run(["nm", str(exe)], capture_output=True, text=True, check=True).stdout
    for s in symbols:
        assert s in nm, f"{exe.name} is not instrumented: no {s}"


def spill_env(tmp_path: Path) -> dict:
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    return {"TORCHCLAD_TAPE_MEMORY_LIMIT": str(LIMIT), "TMPDIR": str(tmpdir)}


# ---- in-memory behaviour ----------------------------------------------------


def test_lifo_mixed_types_many_slabs(tape_check):
    # 3M values of 15 kinds (float, double, int, long, bool, size_t, pointer,
    # char, short, 16-byte and 3-byte structs, long double, arrays), with
    # partial pops in between; every value is checked bit for bit.
    out = run(tape_check, "lifo", "3000000")
    f = facts(out)
    assert int(f["peak_bytes"]) > 20 * 2**20
    assert int(f["slabs"]) >= 20


def test_small_tape_does_not_allocate(tape_check):
    out = run(tape_check, "small")
    assert facts(out)["allocs"] == "0"


def test_push_array_pop_array(tape_check):
    run(tape_check, "array")


def test_oscillation_at_slab_boundary_reuses_spare(tape_check):
    out = run(tape_check, "oscillate")
    # Two slabs (header + data each) over 400k boundary crossings.
    assert int(facts(out)["allocs"]) <= 4


def test_move_only_and_clear(tape_check):
    run(tape_check, "move")


def test_memory_limit_parsing(tape_check):
    run(tape_check, "parse")


@pytest.mark.parametrize("seed", ["1", "2"])
def test_random_walk(tape_check, seed):
    run(tape_check, "random", "3000000", seed)


def test_thread_tapes_stress(tape_check):
    out = run(tape_check, "threads", "300000", env={"OMP_NUM_THREADS": "4"})
    assert facts(out)["nt"] == "4"


def test_debug_mode_checks_types(build_dir):
    exe = compile_cpp(CHECK_SRC, build_dir / "tape_check_debug", "-O1", "-DTORCHCLAD_TAPE_DEBUG",
                      *BASE_FLAGS, *WARN_FLAGS)
    assert facts(run(exe, "debug"))["checked"] == "1"
    run(exe, "lifo", "200000")
    run(exe, "array")


# ---- disk offload -------------------------------------------------------------


def test_offload_values_files_and_cleanup(tape_check, tmp_path):
    env = spill_env(tmp_path)
    out = run(tape_check, "spill", "1000000", env=env)
    f = facts(out)
    spill_dir = Path(f["dir"])
    assert spill_dir.parent == Path(env["TMPDIR"])  # private dir under $TMPDIR
    assert spill_dir.name.startswith("torchclad-tape-")
    # Slabs really went to files: 16 KiB slabs in 1 MiB segment files, so a
    # ~30 MB tape needs many files, each deleted once read back.
    assert int(f["max_files"]) > 1
    assert int(f["spilled"]) > 0 and int(f["loaded"]) > 0
    assert int(f["peak_resident"]) <= LIMIT
    assert not spill_dir.exists()
    assert list(Path(env["TMPDIR"]).iterdir()) == []


def test_offload_lifo_bit_identical(tape_check, tmp_path):
    env = spill_env(tmp_path)
    run(tape_check, "lifo", "1000000", env=env)
    assert list(Path(env["TMPDIR"]).iterdir()) == []


@pytest.mark.parametrize("limit", ["8K", "64K", "1M"])
def test_offload_random_walk(tape_check, tmp_path, limit):
    # The top wanders up and down across spill and reload boundaries (pushes
    # after partial pops re-spill prefetched slabs, loads on demand, moves,
    # clear()).
    env = spill_env(tmp_path)
    env["TORCHCLAD_TAPE_MEMORY_LIMIT"] = limit
    out = run(tape_check, "random", "3000000", "3", env=env)
    assert int(facts(out)["spilled"]) > 0
    assert list(Path(env["TMPDIR"]).iterdir()) == []


def test_offload_cleanup_on_exception(tape_check, tmp_path):
    env = spill_env(tmp_path)
    out = run(tape_check, "spill_exception", env=env)
    f = facts(out)
    assert int(f["files"]) > 0
    assert not Path(f["dir"]).exists()
    assert list(Path(env["TMPDIR"]).iterdir()) == []


@pytest.mark.parametrize("failure", ["write", "mkdtemp"])
def test_offload_io_error_is_an_exception(tape_check, tmp_path, failure):
    # A failing spill write (RLIMIT_FSIZE) or spill directory ($TMPDIR missing)
    # throws std::system_error from push; what was pushed before pops back
    # intact and nothing is left behind.
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    env = {"TMPDIR": str(tmpdir if failure == "write" else tmp_path / "missing")}
    out = run(tape_check, "io_error", failure, env=env)
    assert int(facts(out)["pushed"]) > 0
    assert facts(out)["spilled_dir"] == ("1" if failure == "write" else "0")
    assert list(tmpdir.iterdir()) == []


def test_offload_with_thread_tapes(tape_check, tmp_path):
    env = spill_env(tmp_path)
    env["OMP_NUM_THREADS"] = "3"
    out = run(tape_check, "threads", "200000", env=env)
    assert "spilled0=" in out  # each thread's tape spilled into its own dir
    assert list(Path(env["TMPDIR"]).iterdir()) == []


def test_spill_directory_is_private(tmp_path):
    src = tmp_path / "perm.cpp"
    src.write_text(
        r"""
#include <torchclad/runtime.h>
#include <sys/stat.h>
#include <cstdio>
int main() {
  torchclad::Tape t;
  t.set_memory_limit(16 * 1024);
  for (int i = 0; i < 100000; ++i) t.push(static_cast<double>(i));
  struct stat st;
  if (stat(t.spill_dir().c_str(), &st) != 0) return 1;
  std::printf("OK mode=%o\n", static_cast<unsigned>(st.st_mode & 0777));
  for (int i = 100000; i-- > 0;) if (t.pop<double>() != i) return 2;
  return 0;
}
"""
    )
    exe = compile_cpp(src, tmp_path / "perm", "-O2", *BASE_FLAGS, *WARN_FLAGS)
    env = {"TMPDIR": str(tmp_path)}
    out = run(exe, env=env)
    assert facts(out)["mode"] == "700"
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == []


# ---- build hygiene -------------------------------------------------------------

HYGIENE_TU = r"""
#include <torchclad/runtime.h>
struct S { double a; int b; };
double use(torchclad::Tape& t, torchclad::ThreadTapes& tt) {
  t.push(1.0); t.push(2.0f); t.push(3); t.push(4L); t.push(true); t.push(std::size_t{5});
  t.push(static_cast<const double*>(nullptr)); t.push(S{1, 2});
  double a[3] = {1, 2, 3};
  t.push_array(a, 3);
  t.pop_array(a, 3);
  double r = t.pop<S>().a + (t.pop<const double*>() ? 1 : 0);
  r += static_cast<double>(t.pop<std::size_t>()) + t.pop<bool>();
  r += static_cast<double>(t.pop<long>()) + t.pop<int>();
  r += static_cast<double>(t.pop<float>()) + t.pop<double>();
  tt.local().push(r);
  r += tt.local().pop<double>();
  return r + static_cast<double>(t.size_bytes()) + (t.empty() ? 1 : 0) + std::sin(r);
}
int main() {
  torchclad::Tape t;
  torchclad::ThreadTapes tt;
  return use(t, tt) > 0 ? 0 : 1;
}
"""


@pytest.mark.parametrize("openmp", [True, False], ids=["openmp", "no-openmp"])
def test_runtime_h_compiles_warning_free(tmp_path, openmp):
    src = tmp_path / "tu.cpp"
    src.write_text(HYGIENE_TU)
    flags = ["-O2", "-std=c++17", f"-I{INCLUDE}", "-pthread", *WARN_FLAGS]
    if openmp:
        flags.append("-fopenmp")
    exe = compile_cpp(src, tmp_path / "tu", *flags)
    subprocess.run([str(exe)], check=True, timeout=30)


def test_tape_h_compiles_under_strict_warnings(tmp_path):
    # tape.h alone (math.h belongs to the engine) under stricter flags than
    # generated code is built with.
    src = tmp_path / "tu.cpp"
    src.write_text(HYGIENE_TU.replace("<torchclad/runtime.h>", "<torchclad/tape.h>\n#include <cmath>"))
    compile_cpp(src, tmp_path / "tu", "-O2", "-std=c++17", f"-I{INCLUDE}", "-fopenmp", "-pthread",
                *WARN_FLAGS, "-pedantic", "-Wshadow", "-Wconversion", "-Wsign-conversion",
                "-Wold-style-cast", "-Wcast-align", "-Wnull-dereference", "-Wuseless-cast")


def test_runtime_h_with_and_without_math_h(tmp_path):
    """runtime.h must build before the engine's math.h exists and include it after."""
    src = tmp_path / "tu.cpp"
    src.write_text(
        "#include <torchclad/runtime.h>\n"
        "#ifdef TORCHCLAD_TEST_MATH_H_SEEN\nint seen = 1;\n#else\nint seen = 0;\n#endif\n"
        "int main() { torchclad::Tape t; t.push(std::exp(1.0)); return seen * 0; }\n"
    )
    without = tmp_path / "without" / "torchclad"
    with_ = tmp_path / "with" / "torchclad"
    for d in (without, with_):
        d.mkdir(parents=True)
        for h in RUNTIME.glob("*.h"):    # every runtime header but the engine's math.h
            if h.name != "math.h":
                shutil.copy(h, d / h.name)
    (with_ / "math.h").write_text("#pragma once\n#define TORCHCLAD_TEST_MATH_H_SEEN 1\n")
    for root, expect in ((without.parent, "0"), (with_.parent, "1")):
        proc = subprocess.run(
            [CXX, "-std=c++17", f"-I{root}", *WARN_FLAGS, "-E", "-dM", str(src)],
            capture_output=True, text=True, timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        seen = "TORCHCLAD_TEST_MATH_H_SEEN" in proc.stdout
        assert seen == (expect == "1")
        compile_cpp(src, root / "tu", "-std=c++17", f"-I{root}", "-pthread", *WARN_FLAGS)


def test_fast_path_is_inlined(tmp_path):
    """push/pop of scalars must not leave out-of-line calls in -O2 code."""
    src = tmp_path / "hot.cpp"
    src.write_text(
        "#include <torchclad/runtime.h>\n"
        "void fwd(torchclad::Tape& t, const double* x, const float* y, int n) {\n"
        "  for (int i = 0; i < n; ++i) { t.push(x[i]); t.push(y[i]); t.push(i); }\n}\n"
        "void rev(torchclad::Tape& t, double* x, float* y, int n) {\n"
        "  for (int i = n; i-- > 0;) { (void)t.pop<int>(); y[i] = t.pop<float>(); x[i] = t.pop<double>(); }\n}\n"
    )
    obj = tmp_path / "hot.o"
    proc = subprocess.run(
        [CXX, "-O2", "-std=c++17", f"-I{INCLUDE}", "-c", str(src), "-o", str(obj)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    nm = subprocess.run(["nm", "-C", str(obj)], capture_output=True, text=True, check=True)
    members = set(re.findall(r"torchclad::Tape::(\w+)", nm.stdout))
    # the cold paths stay out of line (so nm does name Tape's members), push/pop do not
    assert {"push_cell_slow", "pop_cell_slow"} <= members, nm.stdout
    assert not members & {"push", "pop"}, nm.stdout


# ---- sanitizers ------------------------------------------------------------------

SAN_ENV = {
    "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
}
SAN_MARKERS = ("AddressSanitizer", "LeakSanitizer", "runtime error:", "UndefinedBehaviorSanitizer")


@pytest.mark.parametrize(
    "case,args,spill",
    [
        ("lifo", ["2000000"], False),
        ("array", [], False),
        ("oscillate", [], False),
        ("spill", ["300000"], True),
        ("spill_exception", [], True),
        ("random", ["1000000", "5"], True),
        ("io_error", ["write"], True),
    ],
)
def test_address_and_ub_sanitizers(tape_check_asan, tmp_path, case, args, spill):
    env = dict(SAN_ENV)
    if spill:
        env.update(spill_env(tmp_path))
    assert_instrumented(tape_check_asan, "__asan_init", "__ubsan_handle_")
    out = run(tape_check_asan, case, *args, env=env, timeout=300)
    for marker in SAN_MARKERS:
        assert marker not in out, out


def test_offload_thread_sanitizer(build_dir, tmp_path):
    """The background loader and the owner thread share slabs: no data races."""
    exe = compile_cpp(CHECK_SRC, build_dir / "tape_check_tsan", "-O1", "-g", "-fsanitize=thread",
                      "-std=c++17", f"-I{INCLUDE}", "-pthread")
    assert_instrumented(exe, "__tsan_init")
    for case, args, limit in (("spill", ["300000"], str(LIMIT)), ("random", ["1000000", "7"], "8K")):
        tmpdir = tmp_path / case
        tmpdir.mkdir()
        env = {"TORCHCLAD_TAPE_MEMORY_LIMIT": limit, "TMPDIR": str(tmpdir),
               "TSAN_OPTIONS": "halt_on_error=1"}
        out = run(exe, case, *args, env=env, timeout=300)
        assert "ThreadSanitizer" not in out, out
        assert list(tmpdir.iterdir()) == []
