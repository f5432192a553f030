"""A deterministic generator of hostile training-loop programs for the fuzz test.

`generate(seed)` builds random surrounding code (nested functions, classes, ifs, with, try,
decorators, one-line compound statements, `;`, backslash continuations, comments and strings
that mention `backward(`, long elif chains and `+` sums), splices buggy snippets from
`fuzz_snippets` in at random statement boundaries with that statement's indentation, then
dresses the text: exotic line breaks (form feed, VT, \\x1c-\\x1e, NEL, U+2028/9) in comments,
strings and blank lines, tabs or spaces, CRLF / CR / LF, a missing final newline, a BOM or a
coding cookie with latin-1 bytes, and non-ASCII text in front of fixed columns.
Same seed, same bytes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

try:
    from tests.fuzz_snippets import SNIPPETS
except ImportError:  # run from benchmarks/ with tests/ on sys.path
    from fuzz_snippets import SNIPPETS

EXOTIC = "\x0c\x0b\x1c\x1d\x1e\x85\u2028\u2029"
EXOTIC_LATIN1 = "\x0c\x0b\x1c\x1d\x1e\x85"
WORDS = ("loss.backward(retain_graph=True)", "opt.zero_grad()", "TODO", "backward(", "step", "x")
NAMES = ("größe", "données", "λr", "变量", "α_β", "naïve")
NAMES_LATIN1 = ("größe", "données", "naïve", "çà", "ñandú")
TEXTS = ("é€😀", "日本語", "ü\u2028ß", "Σ", "é")
TEXTS_LATIN1 = ("éÿ", "ü\x85ß", "£", "à")
ENCODINGS = ("utf-8", "utf-8", "utf-8-sig", "latin-1", "utf-8-cookie")
NEWLINES = ("\n", "\n", "\r\n", "\r")
INDENTS = ("    ", "    ", "  ", "\t", "        ", " ")


@dataclass(frozen=True)
class Program:
    seed: int
    data: bytes
    markers: tuple[str, ...]  # one per spliced snippet, e.g. "_m3"
    codes: tuple[str, ...]  # the rule each snippet was written for
    features: str  # encoding / newline / indent, for failure reports


@dataclass
class Line:
    level: int | None  # indentation level; None = raw text (a continuation line)
    text: str
    slot: bool = True  # may a statement of this level be inserted before this line?


class _Gen:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.encoding = self.rng.choice(ENCODINGS)
        latin1 = self.encoding == "latin-1"
        self.exotic = EXOTIC_LATIN1 if latin1 else EXOTIC
        self.names = NAMES_LATIN1 if latin1 else NAMES
        self.texts = TEXTS_LATIN1 if latin1 else TEXTS
        self.counter = 0
        self.noise = self.rng.random() < 0.6  # a third of the files stay free of exotic breaks

    # --- small pieces -------------------------------------------------------------------------
    def name(self) -> str:
        self.counter += 1
        if self.rng.random() < 0.15:
            return f"{self.rng.choice(self.names)}{self.counter}"
        return f"v{self.counter}"

    def junk(self) -> str:
        """Comment or string content: words, sometimes with an exotic line break inside."""
        parts = [self.rng.choice(WORDS) for _ in range(self.rng.randint(1, 3))]
        if self.noise and self.rng.random() < 0.5:
            parts.insert(self.rng.randrange(len(parts) + 1), self.rng.choice(self.exotic))
        if self.rng.random() < 0.2:
            parts.append(self.rng.choice(self.texts))
        return " ".join(parts)

    def expr(self) -> str:
        return self.rng.choice(["1", "None", "[]", "(1, 2)", "{'k': 2}", "len('ab')", "0.5 * 2"])

    # --- statements ---------------------------------------------------------------------------
    def simple(self, level: int) -> list[Line]:
        r, n = self.rng, self.name()
        kind = r.randrange(12)
        if kind == 0:
            return [Line(level, f"{n} = {self.expr()}")]
        if kind == 1:
            return [Line(level, f"{n} = 1; {n} += 2; pass")]
        if kind == 2:
            return [Line(level, f'{n} = "{self.junk()}"')]
        if kind == 3:
            return [Line(level, f"# {self.junk()}")]
        if kind == 4:
            return [Line(level, f"{n} = 1 + \\"), Line(None, "    2 + \\", False), Line(None, "  3", False)]
        if kind == 5:
            return [Line(level, f"{n} = ("), Line(None, "  4,  # " + self.junk(), False), Line(None, ")", False)]
        if kind == 6:
            body = [Line(None, self.junk(), False) for _ in range(r.randint(1, 3))]
            return [Line(level, f'{n} = """')] + body + [Line(None, '"""', False)]
        if kind == 7:
            return [Line(level, f'print({n}, "{r.choice(self.texts)}")  # {self.junk()}')]
        if kind == 8 and self.noise:
            return [Line(level, "\x0c" if r.random() < 0.5 else "   \x0c")]
        if kind == 9:
            return [Line(level, "")]
        if kind == 10:
            return [Line(level, f"{n} = lambda a: a  # " + self.junk())]
        return [Line(level, "pass")]

    def statement(self, level: int, depth: int) -> list[Line]:
        r = self.rng
        if depth <= 0 or r.random() < 0.55:
            return self.simple(level)
        kind = r.randrange(12)
        n = self.name()
        if kind == 0:
            out = [Line(level, f"if {n!r}:")] + self.block(level + 1, depth - 1)
            for _ in range(r.randint(0, 2)):
                out += [Line(level, "elif 0:", False)] + self.block(level + 1, depth - 1)
            if r.random() < 0.5:
                out += [Line(level, "else:", False)] + self.block(level + 1, depth - 1)
            return out
        if kind == 1:
            return [Line(level, f"for {n} in range(2):")] + self.block(level + 1, depth - 1)
        if kind == 2:
            return [Line(level, "while False:")] + self.block(level + 1, depth - 1)
        if kind == 3:
            return [Line(level, f"with open(__file__) as {n}:")] + self.block(level + 1, depth - 1)
        if kind == 4:
            out = [Line(level, "try:")] + self.block(level + 1, depth - 1)
            out += [Line(level, "except Exception:", False)] + self.block(level + 1, depth - 1)
            if r.random() < 0.5:
                out += [Line(level, "finally:", False)] + self.block(level + 1, depth - 1)
            return out
        if kind == 5:
            decorators = [Line(level, "@staticmethod" if i else "@(lambda f: f)", i == 0) for i in range(r.randint(0, 2))]
            return decorators + [Line(level, f"def {n}(a, b=1, *c, **d):", not decorators)] + self.block(level + 1, depth - 1)
        if kind == 6:
            return [Line(level, f"class {n.capitalize()}(object):")] + self.block(level + 1, depth - 1)
        if kind == 7:
            one = r.choice([f"if {n!r}: {n} = 1; pass", f"for {n} in (): pass", f"while 0: {n} = 2",
                            f"class K{n}: pass", f"with open(__file__) as {n}: pass"])
            return [Line(level, one)]
        if kind == 8 and r.random() < 0.3:
            return self.elif_chain(level)
        if kind == 9 and r.random() < 0.3:
            return self.long_sum(level)
        if kind == 10 and r.random() < 0.3:
            return self.nested(level, depth)
        return self.simple(level)

    def block(self, level: int, depth: int) -> list[Line]:
        out: list[Line] = []
        for _ in range(self.rng.randint(1, 3)):
            out += self.statement(level, depth)
        if all(line.level is None or not line.text.strip(" \x0c") or line.text.lstrip().startswith("#") for line in out):
            out.append(Line(level, "pass"))  # a block needs a statement
        return out

    def size(self) -> int:
        return self.rng.choice([3, 10, 50]) if self.rng.random() < 0.9 else self.rng.randint(200, 1000)

    def elif_chain(self, level: int) -> list[Line]:
        n = self.name()
        out = [Line(level, f"if {n} == -1:"), Line(level + 1, "pass")]
        for i in range(self.size()):
            out += [Line(level, f"elif {n} == {i}:", False), Line(level + 1, f"{n} = {i}")]
        return out

    def long_sum(self, level: int) -> list[Line]:
        n = self.name()
        return [Line(level, f"{n} = 0"), Line(level, f"{n} = " + " + ".join([n] * self.size()))]

    def nested(self, level: int, depth: int) -> list[Line]:
        deep = self.rng.randint(5, 40)
        out = [Line(level + i, f"if {i} or {self.name()}:") for i in range(deep)]
        return out + self.block(level + deep, 0)

    # --- the program --------------------------------------------------------------------------
    def program(self, seed: int) -> Program:
        r = self.rng
        indent, newline = r.choice(INDENTS), r.choice(NEWLINES)
        body: list[Line] = [Line(0, "import torch"), Line(0, "from torch import nn")]
        for _ in range(r.randint(1, 6)):
            body += self.statement(0, r.randint(0, 4))
        markers, codes = [], []
        slots = [i for i, line in enumerate(body) if line.slot and line.level is not None and i >= 2]
        chosen = sorted(r.sample(slots, min(len(slots), r.randint(1, 3))), reverse=True)
        for position in [len(body)] + chosen:
            level = body[position].level if position < len(body) else 0
            code, lines = self.snippet(len(markers), level)
            body[position:position] = lines
            markers.append(f"_m{len(markers)}")
            codes.append(code)
        text = newline.join(self.render(line, indent) for line in body) + newline
        if r.random() < 0.15:
            text = text[: -len(newline)]
        data = self.encode(text, newline)
        features = f"{self.encoding} newline={newline!r} indent={indent!r}"
        return Program(seed, data, tuple(markers), tuple(codes), features)

    def snippet(self, number: int, level: int) -> tuple[str, list[Line]]:
        code, template = self.rng.choice(SNIPPETS)
        template = template.replace("_M", f"_m{number}")
        lines = []
        for raw in template.splitlines():
            stripped = raw.lstrip(" ")
            depth = (len(raw) - len(stripped)) // 4
            if stripped == "{deep}":
                lines += self.elif_chain(level + depth) if self.rng.random() < 0.1 else []
                continue
            if "{sum}" in stripped:
                terms = self.size() if self.rng.random() < 0.2 else 0
                stripped = stripped.replace("{sum}", f" + loss_m{number}" * terms)
            if "{pre}" in stripped:
                pre = f'tag_m{number} = "{self.rng.choice(self.texts)}"; ' if self.rng.random() < 0.5 else ""
                stripped = stripped.replace("{pre}", pre)
            # continuation lines of the snippet keep their relative indentation as raw text
            raw_line = not stripped or (lines and lines[-1].text.endswith("\\"))
            if raw_line and stripped:
                lines.append(Line(None, " " * (4 * (level + depth)) + stripped, False))
            else:
                lines.append(Line(level + depth, stripped, False))
        lines[0].slot = True
        return code, lines

    def render(self, line: Line, indent: str) -> str:
        if line.level is None or not line.text:
            return line.text
        return indent * line.level + line.text

    def encode(self, text: str, newline: str) -> bytes:
        if self.encoding == "utf-8-sig":
            return text.encode("utf-8-sig")
        if self.encoding == "latin-1":
            return f"# -*- coding: latin-1 -*-{newline}".encode() + text.encode("latin-1")
        if self.encoding == "utf-8-cookie":
            return f"#!/usr/bin/env python{newline}# vim: set fileencoding=utf-8 :{newline}".encode() + text.encode()
        return text.encode()


def generate(seed: int) -> Program:
    return _Gen(seed).program(seed)
