"""JIT cache: key, directory safety, validation, locking, crash recovery, warm-load speed.

Every kernel here is a tiny translation unit without torch or runtime headers (a stub Tape),
compiled at -O0, so each build is a few seconds; builds that must be new use a fresh token.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import multiprocessing as mp
import os
import shlex
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from torchclad.toolchain import BuildError, CacheDirError, LockTimeout, cache, load

TESTS = Path(__file__).resolve().parent
FLAGS = ["-O0"]


@dataclass(frozen=True)
class Param:
    name: str
    base: str
    pointer: int = 0
    const: bool = False
    differentiable: bool = True

    def c_type(self, scalar=None):
        return ("const " if self.const else "") + self.base + ("*" if self.pointer else "")


@dataclass(frozen=True)
class Tiny:
    """Derivative stand-in: ``double sq(double x)`` and its generated-style functions."""

    token: str
    wrt: tuple = ("x",)
    name: str = "sq"
    params: tuple = (Param("x", "double"),)
    return_type: Param = Param("", "double")
    template_params: tuple = ()

    @property
    def code(self):
        return (
            "void sq_pullback(double x, double _d_y, double* _d_x) { *_d_x += 2 * x * _d_y; }\n"
            "void sq_grad(double x, double* _d_x) { sq_pullback(x, 1.0, _d_x); }\n"
            "double sq_reverse_forw(double x, torchclad::Tape&) { return x * x; }\n"
            "void sq_reverse_sweep(double x, double _d_y, double* _d_x, torchclad::Tape&) {\n"
            "    *_d_x += 2 * x * _d_y;\n}\n"
        )

    def translation_unit(self):
        return (
            f"// token {self.token}\n#include <cstddef>\n"
            "namespace torchclad { struct Tape {\n"
            "  bool empty() const { return true; }\n"
            "  std::size_t size_bytes() const { return 0; }\n"
            "  void clear() {}\n};}\n"
            "double sq(double x) { return x * x; }\n" + self.code
        )


def tiny(token: str | None = None) -> Tiny:
    return Tiny(token or uuid.uuid4().hex)


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A cache with one built tiny kernel: (cache dir, token, module)."""
    root = tmp_path_factory.mktemp("cache-shared") / "cache"
    token = uuid.uuid4().hex
    m = load(tiny(token), cache_dir=root, extra_cflags=FLAGS)
    assert m.sq_f64(3.0) == 9.0
    return root, token, m


def run_py(code: str, timeout=120, **env):
    e = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(TESTS.parent)]), **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=e,
                          capture_output=True, text=True, timeout=timeout)


# ---------------------------------------------------------------------------------------------
# Key


def test_key_changes_with_source_glue_flags_and_compiler(monkeypatch):
    base = cache.plan(tiny("a"), extra_cflags=FLAGS)
    assert cache.plan(tiny("a"), extra_cflags=FLAGS).key == base.key  # deterministic
    assert cache.plan(tiny("b"), extra_cflags=FLAGS).key != base.key  # source text
    assert cache.plan(tiny("a"), extra_cflags=["-O2"]).key != base.key  # flags
    assert cache.plan(tiny("a")).key != base.key
    glue_only = cache.plan(Tiny("a", wrt=()), extra_cflags=FLAGS)  # same text, other glue
    assert glue_only.tu.text == base.tu.text and glue_only.key != base.key
    monkeypatch.setenv("CXX", "g++ -Wall")
    assert cache.plan(tiny("a"), extra_cflags=FLAGS).key != base.key  # compiler argv
    assert len(base.key) == 64


# ---------------------------------------------------------------------------------------------
# Directory safety


def test_cache_dirs_are_created_0700(tmp_path, built):
    root = tmp_path / "a" / "b" / "cache"
    assert cache.cache_dir(root) == root
    for d in (root, root / "locks", root / "tmp", root / "failed"):
        assert mode(d) == 0o700, d
    shared, _, m = built
    assert mode(shared / m.__torchclad_key__) == 0o700  # an entry


def test_default_cache_dir_follows_env(tmp_path, monkeypatch):
    monkeypatch.delenv("TORCHCLAD_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.default_cache_dir() == tmp_path / "xdg" / "torchclad"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache.default_cache_dir() == Path.home() / ".cache" / "torchclad"
    monkeypatch.setenv("TORCHCLAD_CACHE_DIR", str(tmp_path / "mine"))
    assert cache.cache_dir() == tmp_path / "mine"


def test_symlinked_cache_dir_is_rejected(tmp_path, monkeypatch):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(CacheDirError, match="symlink"):
        cache.cache_dir(link)
    monkeypatch.setenv("TORCHCLAD_CACHE_DIR", str(link))
    with pytest.raises(CacheDirError, match="symlink"):
        load(tiny(), extra_cflags=FLAGS)
    # a symlinked subdirectory is refused too
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    (root / "locks").symlink_to(real)
    with pytest.raises(CacheDirError, match="symlink"):
        cache.cache_dir(root)


@pytest.mark.parametrize("bits", [0o770, 0o707, 0o720])
def test_group_or_other_writable_cache_dir_is_rejected(tmp_path, bits):
    d = tmp_path / "c"
    d.mkdir()
    os.chmod(d, bits)
    with pytest.raises(CacheDirError, match="writable by group/others"):
        cache.cache_dir(d)


# ---------------------------------------------------------------------------------------------
# Validation


def test_tampered_extension_is_not_loaded_and_truncated_one_is_rebuilt(built):
    root, token, m = built
    entry = root / m.__torchclad_key__
    manifest = json.loads((entry / "manifest.json").read_text())
    so = entry / manifest["so"]
    plan = cache.plan(tiny(token), extra_cflags=FLAGS)
    assert cache._valid_entry(entry, plan.key, plan.so_name) == so

    def replace(data: bytes):  # a new file: this process has the old one mapped
        part = so.with_name("part")
        part.write_bytes(data)
        os.replace(part, so)

    good = so.read_bytes()
    replace(good[:-1] + bytes([good[-1] ^ 1]))  # planted: same size, other bytes
    assert cache._valid_entry(entry, plan.key, plan.so_name) is None
    replace(good[: len(good) // 2])  # truncated
    assert cache._valid_entry(entry, plan.key, plan.so_name) is None

    r = run_py(f"""
        from test_cache import tiny, FLAGS
        from torchclad.toolchain import load
        m = load(tiny({token!r}), cache_dir={str(root)!r}, extra_cflags=FLAGS)
        assert m.sq_f64(3.0) == 9.0
    """)
    assert r.returncode == 0, r.stderr
    assert "torchclad: compiling sq (first use, cached afterwards)..." in r.stderr
    assert cache._valid_entry(entry, plan.key, plan.so_name) == so  # rebuilt in place


# ---------------------------------------------------------------------------------------------
# Warm load


def _files(root: Path) -> dict:
    """(inode, mtime) of every file under the cache root but its lock files."""
    return {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in root.rglob("*")
            if p.is_file() and "locks" not in p.relative_to(root).parts}


def test_fresh_process_loads_from_cache_quickly(built, capsys):
    root, token, _ = built
    before = _files(root)
    assert any(p.suffix == ".so" for p in before)
    t0 = time.perf_counter()
    r = run_py(f"""
        import json, time
        t0 = time.perf_counter()
        import torchclad.toolchain as b
        t1 = time.perf_counter()
        from test_cache import tiny, FLAGS
        t2 = time.perf_counter()
        m = b.load(tiny({token!r}), cache_dir={str(root)!r}, extra_cflags=FLAGS)
        t3 = time.perf_counter()
        assert m.sq_f64(3.0) == 9.0
        print(json.dumps({{"import": t1 - t0, "load": t3 - t2}}))
    """)
    wall = time.perf_counter() - t0
    assert r.returncode == 0, r.stderr
    assert _files(root) == before  # nothing was rebuilt or added
    t = json.loads(r.stdout.strip().splitlines()[-1])
    with capsys.disabled():
        print(f"\n[cache] fresh process: import torchclad.toolchain {t['import'] * 1e3:.1f} ms, "
              f"load() from cache {t['load'] * 1e3:.1f} ms, whole process {wall * 1e3:.0f} ms")


# ---------------------------------------------------------------------------------------------
# Concurrency and crashes


def _worker(token, root, q, barrier=None):
    err = io.StringIO()
    try:
        if barrier is not None:
            barrier.wait(timeout=120)
        with contextlib.redirect_stderr(err):
            m = load(tiny(token), cache_dir=root, extra_cflags=FLAGS, lock_timeout=300)
            value = m.sq_f64(3.0)
        q.put((os.getpid(), value, "compiling" in err.getvalue(), None))
    except BaseException as e:  # report, do not hang the parent
        q.put((os.getpid(), None, False, f"{type(e).__name__}: {e}"))


def test_eight_processes_build_the_same_new_kernel(tmp_path):
    ctx = mp.get_context("spawn")
    root, token = str(tmp_path / "cache"), uuid.uuid4().hex
    q, barrier = ctx.Queue(), ctx.Barrier(8)
    procs = [ctx.Process(target=_worker, args=(token, root, q, barrier)) for _ in range(8)]
    for p in procs:
        p.start()
    results = [q.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert [r[3] for r in results] == [None] * 8, results
    assert [r[1] for r in results] == [9.0] * 8
    assert sum(r[2] for r in results) == 1  # built once; the others waited and loaded it
    key = cache.plan(tiny(token), extra_cflags=FLAGS).key
    assert not list((Path(root) / "tmp").iterdir())
    assert (Path(root) / key / "manifest.json").is_file()


def _slow_compiler(tmp_path):
    """A g++ wrapper that, while ``marker`` exists, records its pid and hangs before compiling."""
    marker, pidfile = tmp_path / "slow", tmp_path / "compiler.pid"
    wrapper = tmp_path / "slow-g++"
    wrapper.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        if [ "$1" != "--version" ] && [ -e "{marker}" ]; then
            echo $$ > "{pidfile}.part" && mv "{pidfile}.part" "{pidfile}"
            sleep 120
        fi
        exec g++ "$@"
    """))
    wrapper.chmod(0o755)
    marker.touch()
    return wrapper, marker, pidfile


def _wait_for(path: Path, timeout=120.0) -> int:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.02)
    return int(path.read_text())


def _lock_is_held(lock: Path) -> bool:
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def test_sigkilled_builder_does_not_block_the_next_build(tmp_path, monkeypatch):
    wrapper, marker, pidfile = _slow_compiler(tmp_path)
    monkeypatch.setenv("CXX", str(wrapper))
    root, token = tmp_path / "cache", uuid.uuid4().hex
    key = cache.plan(tiny(token), extra_cflags=FLAGS).key

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_worker, args=(token, str(root), q))
    p.start()
    compiler_pid = _wait_for(pidfile)  # the child holds the lock and is "compiling"
    assert _lock_is_held(root / "locks" / f"{key}.lock")
    os.kill(p.pid, signal.SIGKILL)  # the process holding the lock ...
    os.killpg(compiler_pid, signal.SIGKILL)  # ... and its compiler's process group
    p.join(timeout=60)
    assert p.exitcode == -signal.SIGKILL
    assert list((root / "tmp").glob(f"{key}.*"))  # its half-done build dir is left behind

    marker.unlink()
    t0 = time.monotonic()
    m = load(tiny(token), cache_dir=root, extra_cflags=FLAGS, lock_timeout=30)
    assert m.sq_f64(3.0) == 9.0
    assert time.monotonic() - t0 < 30
    assert not list((root / "tmp").glob(f"{key}.*"))  # cleaned up by the next builder


def test_killed_compiler_raises_and_next_build_succeeds(tmp_path, monkeypatch):
    wrapper, marker, pidfile = _slow_compiler(tmp_path)
    monkeypatch.setenv("CXX", str(wrapper))
    root, token = tmp_path / "cache", uuid.uuid4().hex
    errors = []

    def build():
        try:
            load(tiny(token), cache_dir=root, extra_cflags=FLAGS)
        except BuildError as e:
            errors.append(e)

    with contextlib.redirect_stderr(io.StringIO()):
        th = threading.Thread(target=build)
        th.start()
        os.killpg(_wait_for(pidfile), signal.SIGKILL)
        th.join(timeout=60)
    assert len(errors) == 1 and "killed by signal 9" in str(errors[0])
    assert Path(errors[0].source).is_file()  # the source is kept for reading

    marker.unlink()
    m = load(tiny(token), cache_dir=root, extra_cflags=FLAGS, lock_timeout=30)
    assert m.sq_f64(3.0) == 9.0


def test_lock_timeout_is_a_clear_error(tmp_path):
    root = cache.cache_dir(tmp_path / "cache")
    t = tiny()
    lock = root / "locks" / f"{cache.plan(t, extra_cflags=FLAGS).key}.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another "process" is building this key
        os.write(fd, b"4242\n")
        t0 = time.monotonic()
        with pytest.raises(LockTimeout, match=r"timed out after 0.3 s .*held by pid 4242"):
            load(t, cache_dir=root, extra_cflags=FLAGS, lock_timeout=0.3)
        assert time.monotonic() - t0 < 5
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------
# Flags and compiler names with shell metacharacters: the compiler runs from an argv list, never
# through a shell, so such text reaches it verbatim (or names a program that does not exist)


def _recording_compiler(tmp_path):
    """A g++ wrapper that writes its argv (NUL-separated) to ``argv.bin``, then runs g++."""
    record = tmp_path / "argv.bin"
    wrapper = tmp_path / "recording-g++"
    wrapper.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        if [ "$1" != "--version" ]; then printf '%s\\0' "$@" > "{record}"; fi
        exec g++ "$@"
    """))
    wrapper.chmod(0o755)
    return wrapper, record


def _metachar_flags(canary: Path) -> list[str]:
    return [
        f"-DTC_SEMI=1; touch {canary}.semi; rm -rf {canary}.dir",
        f"-DTC_SUBST=$(touch {canary}.subst)",
        f"-DTC_BACKTICK=`touch {canary}.tick`",
        f"-DTC_PIPE=1|touch {canary}.pipe",
        f"-DTC_AND=1 && touch {canary}.and",
        f"-DTC_REDIRECT=1>{canary}.redirect",
        "-DTC_QUOTES='\"$HOME\"'",
    ]


def test_flags_with_shell_metacharacters_reach_the_compiler_verbatim(tmp_path, monkeypatch):
    wrapper, record = _recording_compiler(tmp_path)
    monkeypatch.setenv("CXX", str(wrapper))
    canary = tmp_path / "canary"
    (tmp_path / "canary.dir").mkdir()
    flags = _metachar_flags(canary)
    include = f"{tmp_path}/inc; touch {canary}.inc"
    m = load(tiny(), cache_dir=tmp_path / "cache", extra_cflags=[*FLAGS, *flags],
             extra_include_dirs=[include])
    assert m.sq_f64(3.0) == 9.0
    argv = record.read_bytes().split(b"\0")[:-1]
    for flag in flags:
        assert argv.count(flag.encode()) == 1, flag  # one argument, unchanged
    assert f"-I{include}".encode() in argv
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("canary")) == ["canary.dir"]
    log = (Path(m.__torchclad_source__).parent / "build.log").read_text()
    assert "$(touch" in log and "`touch" in log  # the log shows the argv, shell-quoted


def test_metacharacters_naming_an_input_file_fail_the_build_without_running_anything(tmp_path):
    canary = tmp_path / "canary"
    bad = [f"$(touch {canary}.subst)", f"`touch {canary}.tick`", f";touch {canary}.semi"]
    for flag in bad:
        with pytest.raises(BuildError) as err:
            load(tiny(), cache_dir=tmp_path / "cache", extra_cflags=[*FLAGS, flag])
        assert shlex.quote(flag) in str(err.value)  # the command line shown, shell-quoted
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("canary")]


@pytest.mark.parametrize("cxx", ["g++; touch {canary}", "$(touch {canary}) g++", "`touch {canary}`",
                                 "g++ && touch {canary}"])
def test_compiler_variable_with_shell_metacharacters_is_not_run_by_a_shell(tmp_path, monkeypatch, cxx):
    canary = tmp_path / "canary"
    monkeypatch.setenv("CXX", cxx.format(canary=canary))
    with pytest.raises(BuildError, match="cannot run the C\\+\\+ compiler|exited with status"):
        load(tiny(), cache_dir=tmp_path / "cache", extra_cflags=FLAGS)
    assert not canary.exists()
