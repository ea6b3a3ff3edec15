"""Diagnostics raised by the engine."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Loc:
    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


NOLOC = Loc("<generated>", 0, 0)


class DiffError(ValueError):
    """A kernel the engine cannot differentiate. The message starts with file:line:col."""

    def __init__(self, loc: Loc | None, message: str):
        self.loc = loc
        self.message = message
        super().__init__(f"{loc}: {message}" if loc else message)


class ParallelWarning(UserWarning):
    """An OpenMP pragma the engine did not keep, or a reverse loop it runs serially; the
    message starts with file:line:col and gives the reason."""
