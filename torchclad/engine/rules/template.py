"""The rule table's derivative templates as IR.

A template is C++ text over placeholders: `{d}` (the incoming adjoint or tangent), `{x0}`,
`{x1}`, ... (the call's arguments) and `{y}` (its result), e.g.
`{d} * ::torchclad::rt::d_tanh({y})`. The table is written once, as text; this module reads
that text (a closed grammar: numbers, placeholders, calls, `+ - * /`, unary minus and
parentheses) into IR once, so that a pass that needs the template's structure -- the forward
mode differentiating a generated pullback -- gets IR and never parses generated code.

A rule application in generated code is a `Raw` whose text numbers the placeholders the
template uses (`numbered`: `{0} * ::torchclad::rt::d_tanh({1})`) with those values as its
reads; the rule table (math.py) maps that text back to its template, so such a `Raw` can be
expanded into the structured expression.
"""
from __future__ import annotations

import functools
import re

from .. import ir

_TOKEN = re.compile(r"\s*(?:(\{\w+\})|(\d+(?:\.\d*)?)|((?:::)?[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*)"
                    r"|(.))")


class TemplateError(ValueError):
    """A rule template outside the grammar (a mistake in the table)."""


def _tokens(text: str) -> list:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            break
        pos = m.end()
        ph, num, name, op = m.groups()
        if ph:
            out.append(("ph", ph[1:-1]))
        elif num:
            out.append(("num", num))
        elif name:
            out.append(("name", name))
        elif op and not op.isspace():
            out.append(("op", op))
    return out


class _Parser:
    """Recursive descent over one template; builds a tree of tuples:
    ('ph', key) ('num', text) ('call', name, args) ('bin', op, l, r) ('neg', x)."""

    def __init__(self, text: str):
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else ("end", "")

    def take(self, kind: str, value: str | None = None):
        tok = self.peek()
        if tok[0] != kind or (value is not None and tok[1] != value):
            raise TemplateError(f"rule template {self.text!r}: expected {value or kind} at "
                                f"token {self.i}, found {tok[1]!r}")
        self.i += 1
        return tok

    def parse(self):
        tree = self.sum()
        self.take("end")
        return tree

    def sum(self):
        tree = self.product()
        while self.peek() in (("op", "+"), ("op", "-")):
            op = self.take("op")[1]
            tree = ("bin", op, tree, self.product())
        return tree

    def product(self):
        tree = self.unary()
        while self.peek() in (("op", "*"), ("op", "/")):
            op = self.take("op")[1]
            tree = ("bin", op, tree, self.unary())
        return tree

    def unary(self):
        if self.peek() == ("op", "-"):
            self.take("op")
            return ("neg", self.unary())
        return self.primary()

    def primary(self):
        kind, value = self.peek()
        if kind == "ph" or kind == "num":
            self.i += 1
            return (kind, value)
        if kind == "name":
            self.i += 1
            self.take("op", "(")
            args = [self.sum()]
            while self.peek() == ("op", ","):
                self.take("op")
                args.append(self.sum())
            self.take("op", ")")
            return ("call", value, tuple(args))
        self.take("op", "(")
        tree = self.sum()
        self.take("op", ")")
        return tree


@functools.lru_cache(maxsize=None)
def parse(text: str):
    """The tree of one template (cached: the table is parsed once)."""
    return _Parser(text).parse()


def build(text: str, values: dict, typ: ir.Type) -> ir.Expr:
    """The IR of template `text` with each placeholder replaced by values[key]; the template's
    own nodes (products, calls of the runtime's helpers) take the floating type `typ`."""

    def go(t):
        kind = t[0]
        if kind == "ph":
            return values[t[1]]
        if kind == "num":
            return ir.Const(t[1], ir.INT if "." not in t[1] else typ)
        if kind == "neg":
            return ir.Unary("-", go(t[1]), typ)
        if kind == "call":
            return ir.Call(t[1], tuple(go(a) for a in t[2]), typ, False)
        return ir.Binary(t[1], go(t[2]), go(t[3]), typ)

    return go(parse(text))


def placeholders(text: str) -> list:
    """The placeholder keys a template spells, in first-use order."""
    return list(dict.fromkeys(re.findall(r"\{(\w+)\}", text)))


def numbered(text: str) -> str:
    """`text` with its placeholders numbered in first-use order (`{0} * f({1})`): how a
    `Raw` spells a template, with the placeholders' values as its reads in that order."""
    order = placeholders(text)
    return text.format(**{k: "{%d}" % order.index(k) for k in order})
