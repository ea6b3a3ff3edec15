"""Command line: ``torchclad gen FILE --fn NAME [--wrt ARGS]`` prints the generated derivative.

Exit status: 0 on success, 2 when the kernel cannot be read or differentiated (the diagnostic,
``file:line:col: ...``, goes to stderr).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="torchclad",
        description="torchclad: compiler-generated gradients for C++ kernels",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    gen = sub.add_parser("gen", help="print the generated derivative code of a C++ function")
    gen.add_argument("file", metavar="FILE", help="C++ source file")
    gen.add_argument("--fn", required=True, metavar="NAME", help="function to differentiate")
    gen.add_argument("--wrt", default=None, metavar="ARGS",
                     help='parameters to differentiate, Clad style: "x, y" or "0, 2" '
                          "(default: every floating parameter)")
    return p


def _gen(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        source = path.read_text()
    except OSError as e:
        print(f"torchclad gen: cannot read {args.file}: {e.strerror or e}", file=sys.stderr)
        return 2
    from torchclad.engine import differentiate

    try:
        d = differentiate(source, args.fn, args.wrt, filename=str(path))
    except ValueError as e:  # DiffError (file:line:col: ...) and bad --fn / --wrt
        print(str(e), file=sys.stderr)
        return 2
    code = d.code
    sys.stdout.write(code if code.endswith("\n") else code + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "gen":
        return _gen(args)
    return 2  # unreachable: argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
