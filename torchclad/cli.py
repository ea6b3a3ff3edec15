"""Command line.

- ``torchclad gen FILE --fn NAME [--wrt ARGS]`` prints the generated derivative.
- ``torchclad aot FILE --fn NAME [--wrt ARGS] -o DIR [--spec SPEC.json | --inputs ...]`` writes
  the kernel as a LibTorch C++ op (:mod:`torchclad.toolchain.libtorch`).

Exit status: 0 on success, 2 when the kernel cannot be read or differentiated, or the spec does
not fit it (the diagnostic, ``file:line:col: ...`` or the spec key, goes to stderr).
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
    _aot_parser(sub)
    return p


_AOT_EPILOG = """\
The spec says what torchclad.function's inputs / outputs / sizes say, with expressions
instead of lambdas (Python syntax, translated to C++ checks and sizes):

  {"inputs":  ["x", "w"],                       pointer params read from tensors, in order
   "outputs": {"out": "x.shape",                 arrays the kernel writes: their shapes
               "ss": "[x.size(0)]"},
   "sizes":   {"B": "x.size(0)", "C": "x.size(1)"},   scalar params
   "checks":  ["w.size(0) == C"],                optional: conditions a call must meet
   "indices": {"idx": "wte.size(0)"}}            optional: integer inputs' values in [0, n)

Expressions: x.size(i), x.shape[i], x.numel(), x.dim(), len(x), sizes declared before,
integers, + - * // %, min(), max(); shapes: x.shape, x.shape[a:b], [d0, *x.shape[1:], d2],
[] (0-dim). A file may also map function names to specs: {"f": {...}, "g": {...}}.
Without --spec and --inputs, FILE's name with .json (kernel.cpp -> kernel.json) is read.
DIR gets NAME.h, NAME.cpp, torchclad/ (the runtime) and a CMakeLists.txt defining the
target torchclad_ops (without it: compile NAME.cpp with -I DIR):

  find_package(Torch REQUIRED)    # -DCMAKE_PREFIX_PATH=$(python -c 'import torch.utils;
                                  #    print(torch.utils.cmake_prefix_path)')
  add_subdirectory(DIR)
  target_link_libraries(app PRIVATE torchclad_ops)

and C++ calls torchclad_ops::NAME(tensors...) (autograd, float32 / float64, CPU).
"""


def _aot_parser(sub) -> None:
    aot = sub.add_parser(
        "aot", help="write a C++ kernel as a LibTorch op (C++ header + source, no Python at run time)",
        description="Differentiate a kernel and write it as a LibTorch C++ op: the kernel, its "
                    "generated split forward / reverse sweep, the tape runtime, a "
                    "torch::autograd::Function and a TORCH_LIBRARY registration.",
        epilog=_AOT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    aot.add_argument("file", metavar="FILE", help="C++ source file")
    aot.add_argument("--fn", required=True, metavar="NAME", help="function to differentiate")
    aot.add_argument("--wrt", default=None, metavar="ARGS",
                     help='parameters with gradients, Clad style: "x, y" (default: every '
                          "floating parameter)")
    aot.add_argument("--op", default=None, metavar="OPNAME",
                     help="the op's name: torchclad_ops::OPNAME, OPNAME.h (default: NAME)")
    aot.add_argument("-o", "--out", required=True, metavar="DIR", help="output directory")
    aot.add_argument("--spec", metavar="SPEC.json", help="the op's spec (JSON, see below)")
    aot.add_argument("--inputs", metavar="NAMES", help='the spec on the command line: "x, w"')
    aot.add_argument("--output", action="append", default=[], metavar="NAME=SHAPE",
                     help="an output and its shape, e.g. out=x.shape (repeat)")
    aot.add_argument("--size", action="append", default=[], metavar="NAME=EXPR",
                     help="a scalar parameter, e.g. n=x.numel() (repeat)")
    aot.add_argument("--check", action="append", default=[], metavar="EXPR",
                     help="a condition every call must meet (repeat)")
    aot.add_argument("--index", action="append", default=[], metavar="NAME=EXPR",
                     help="an integer input whose values lie in [0, EXPR) (repeat)")


def _read(args: argparse.Namespace) -> str | None:
    """The text of ``args.file``; None (and the reason on stderr) if it cannot be read."""
    try:
        return Path(args.file).read_text()
    except OSError as e:
        print(f"torchclad {args.command}: cannot read {args.file}: {e.strerror or e}",
              file=sys.stderr)
        return None


def _gen(args: argparse.Namespace) -> int:
    path = Path(args.file)
    source = _read(args)
    if source is None:
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


def _aot(args: argparse.Namespace) -> int:
    from torchclad.toolchain import libtorch, libtorch_spec

    path = Path(args.file)
    source = _read(args)
    if source is None:
        return 2
    try:
        if args.inputs is not None or args.output or args.size or args.check or args.index:
            if args.spec:
                raise libtorch_spec.SpecError("give the spec either as --spec or as --inputs / "
                                              "--output / --size, not both")
            spec = libtorch_spec.spec_from_args(args.inputs, args.output, args.size, args.check,
                                                args.index)
        else:
            spec = libtorch_spec.load_spec(args.spec or path.with_suffix(".json"), args.fn)
        files = libtorch.generate(source, args.fn, args.wrt, spec=spec, out_dir=args.out,
                                  filename=str(path), op_name=args.op)
    except ValueError as e:  # DiffError, SpecError, bad --fn / --wrt
        print(str(e), file=sys.stderr)
        return 2
    print(f"torchclad aot: wrote {files[0]} and {files[1]} "
          f"(torchclad_ops::{args.op or args.fn})")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "gen":
        return _gen(args)
    if args.command == "aot":
        return _aot(args)
    return 2  # unreachable: argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
