"""The results file of the benchmark suite, shared by :mod:`benchlib` (which writes sections)
and :mod:`render` (which renders them): where the files are, reading and atomic writing, and
how times and ratios are spelled in tables and logs.

This module imports no other benchmark module, so that both can import it.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS_JSON = HERE / "results.json"
RESULTS_MD = HERE / "results.md"
RESULTS_PNG = HERE / "results.png"

# version of the section layout; render.py shows a section written by another version as stale
SCHEMA = 2


def load_results(path: Path = RESULTS_JSON) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
        if isinstance(data, dict) and isinstance(data.get("sections"), dict):
            return data
    except (OSError, ValueError):
        pass
    return {"sections": {}}


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and one rename."""
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 is wrong for a committed file
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def fmt_ms(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    ms = seconds * 1e3
    return f"{ms:.3f}" if ms < 1 else f"{ms:.2f}" if ms < 100 else f"{ms:.0f}"


def fmt_x(r: float | None) -> str:
    return "–" if r is None else f"{r:.2f}×"
