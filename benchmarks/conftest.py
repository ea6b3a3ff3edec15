"""pytest configuration for benchmarks/: `make bench` runs `pytest benchmarks --benchmark-only`.

pytest only collects test_*.py by default; the benchmark modules are bench_*.py (runnable as
scripts too), so collect those here. Each module has one test that takes the pytest-benchmark
fixture (so --benchmark-only keeps it), runs its whole suite once and writes its section of
benchmarks/results.json (results.md and results.png are re-rendered from it).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_collect_file(file_path: Path, parent):
    # a file named on the command line is collected by pytest itself (whatever its name):
    # collecting it here as well would run its benchmark twice
    if file_path.suffix == ".py" and file_path.name.startswith("bench_") and \
            not parent.session.isinitpath(file_path):
        return pytest.Module.from_parent(parent, path=file_path)
    return None
