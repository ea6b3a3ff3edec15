"""Build and run the ODE gradient driver (ode.cpp + ode_driver.cpp) for the checkpointing
tests (tests/test_checkpoint.py) and benchmark (benchmarks/bench_checkpoint.py)."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CXX = os.environ.get("CXX", "g++")


def build(out_dir: Path) -> Path:
    """Generate the three gradients with the engine and compile them with the driver."""
    from torchclad import engine as ad

    eng = ad.Engine((HERE / "ode.cpp").read_text(), "ode.cpp")
    derivs = [eng.derive(f, ["y", "k"]) for f in ("ode_taped", "ode_checkpointed", "ode_every")]
    tu = out_dir / "ode_generated.cpp"
    tu.write_text(ad.driver.combine(derivs))
    exe = out_dir / "ode_driver"
    cmd = [CXX, "-O2", "-std=c++17", f"-I{ROOT / 'csrc' / 'runtime'}", "-Wall", "-Werror",
           "-Wno-unknown-pragmas", "-pthread", str(tu), str(HERE / "ode_driver.cpp"), "-o",
           str(exe)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}\n{proc.stderr}")
    return exe


def run(exe: Path, mode: str, nsteps: int, env: dict | None = None) -> dict:
    """mode: taped | checkpointed | every:K. Returns the driver's facts (grad as floats)."""
    full = {k: v for k, v in os.environ.items() if k != "TORCHCLAD_TAPE_MEMORY_LIMIT"}
    full.update(env or {})
    proc = subprocess.run([str(exe), mode, str(nsteps)], capture_output=True, text=True,
                          env=full, timeout=300)
    if proc.returncode != 0 or not proc.stdout.startswith("OK"):
        raise RuntimeError(f"{exe.name} {mode} {nsteps}: rc={proc.returncode}\n"
                           f"{proc.stdout}{proc.stderr}")
    facts: dict = dict(re.findall(r"(\w+)=(\S+)", proc.stdout))
    facts["grad"] = tuple(float.fromhex(x) for x in facts["grad"].strip(",").split(","))
    for k in ("tape_bytes", "peak_resident", "spilled", "rss_kb"):
        facts[k] = int(facts[k])
    facts["ms"] = float(facts["ms"])
    return facts
