"""IPython syntax in notebook cells, made parseable for the analysis.

IPython accepts lines Python does not: line magics (``%matplotlib inline``), shell escapes
(``!pip install torch``), help (``?obj``, ``obj?``), autocall escapes (``/f 1``, ``,f a``, ``;f a``),
assignments from them (``files = !ls``, ``t = %timeit -o f()``) and, on a cell's first line, cell
magics (``%%time``). None of these can start a logical line in Python, so a line is such an escape
only at the start of a logical line (not inside brackets, a string or after a backslash).

IPython's automagic (on by default, and all over Colab notebooks) also runs a line magic written
without its ``%``: ``cd drive/My\\ Drive``, ``ls``, ``pip install x``. As IPython's prefilter decides,
such a line starts with the magic's name, alone or followed by a space and anything but a Python
operator (``ls = []``, ``env["X"]``, ``pip.main(...)``, ``time in t`` stay Python).

Each escape, from its first character to the end of its line (and of the lines it continues with a
final backslash), is replaced by a unique name: an opaque value the analysis knows nothing about.
Continued lines become empty, so every line keeps its number and every character before the
escape keeps its column. The replacements are undone on the fixed program.

A cell magic whose body IPython runs as Python in the kernel (``%%time``, ``%%capture``...) keeps
its body; any other (``%%bash``, ``%%writefile``, ``%%html``, or one we do not know) makes the cell
no Python: it is left out of the program."""

from __future__ import annotations

import re
from typing import Callable, Optional

from fixer.source import split_lines

ESCAPES = ("%", "!", "?", "/", ",", ";")
# IPython's built-in cell magics that execute their body as Python in the user's namespace
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})
# `targets = %magic` / `targets = !cmd`: no quotes or parentheses, so no valid Python line matches
_ASSIGNED = re.compile(r"[ \t]*[\w.\[\], \t*]+?[ \t]*=[ \t]*(?=[%!])")
_CELL_MAGIC = re.compile(r"%%(\w*)")
# line magics (and IPython's shell aliases) that people call without the % in notebooks
AUTOMAGICS = frozenset(
    "alias aimport autoreload bookmark cat cd clear conda cp dhist dirs env history ldir less lf lk ll load_ext ls "
    "lsmagic lx magic mamba man matplotlib mkdir more mv pip popd pushd pwd pylab reload_ext reset rm rmdir run sx "
    "system tensorflow_version time timeit unalias unload_ext who who_ls whos xdel".split()
)
_AUTOMAGIC = re.compile(r"[ \t]*(\w+)(?:[ \t]+(.*))?$")
# after the name, what makes the line Python (IPython's list, and a few more to be safe)
_PYTHON_REST = re.compile(r"[!=()<>,+*/%^&|:;\[]|-=|(?:in|is|and|or|if|else|not)\b")

Replacement = tuple[str, str]  # (text in the program, original text)


def neutralise(source: str, placeholder: Callable[[], str]) -> Optional[tuple[str, list[Replacement]]]:
    """The cell's text with its IPython escapes replaced, and the replacements; None if the cell is
    not Python (a cell magic that runs its body elsewhere)."""
    lines = split_lines(source)
    first = next((index for index, line in enumerate(lines) if line.strip()), None)
    if first is not None:
        magic = _CELL_MAGIC.match(lines[first])
        if magic and magic.group(1) not in PYTHON_CELL_MAGICS:
            return None
    out: list[str] = []
    replacements: list[Replacement] = []
    scanner = _Scanner()
    index = 0
    while index < len(lines):
        line = lines[index]
        body = line.rstrip("\r\n")
        start = _escape_start(body, scanner) if scanner.at_logical_start() else None
        if start is None:
            scanner.feed(body)
            out.append(line)
            index += 1
            continue
        last = index  # a magic continues on the next line after a final backslash
        while lines[last].rstrip("\r\n").endswith("\\") and last + 1 < len(lines):
            last += 1
        breaks = [lines[i][len(lines[i].rstrip("\r\n")) :] for i in range(index, last + 1)]
        original = "".join(lines[index : last + 1])[start:]
        original = original[: len(original) - len(breaks[-1])] if breaks[-1] else original
        name = placeholder()
        program = name + "".join(breaks[:-1])
        replacements.append((program, original))
        out.append(body[:start] + program + breaks[-1])
        index = last + 1
    return "".join(out), replacements


def _escape_start(body: str, scanner: "_Scanner") -> Optional[int]:
    """Where the IPython escape on a line that starts a logical line begins, or None."""
    stripped = body.lstrip(" \t\f")
    if not stripped:
        return None
    indent = len(body) - len(stripped)
    if stripped.startswith(ESCAPES):
        return indent
    automagic = _AUTOMAGIC.match(body)
    if automagic and automagic.group(1) in AUTOMAGICS and not _PYTHON_REST.match(automagic.group(2) or ""):
        return indent
    assigned = _ASSIGNED.match(body)
    if assigned:
        return assigned.end()
    probe = scanner.copy()
    code_end = probe.feed(body)
    if body[:code_end].rstrip().endswith("?") and probe.at_logical_start():
        return indent  # obj? / obj??: help
    return None


class _Scanner:
    """Just enough of Python's tokenizer to know whether a line starts a logical line: open
    brackets, open strings, a final backslash; and where a line's comment begins."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote = ""  # the open string's quote: ', ", ''' or \"\"\"
        self.continued = False

    def copy(self) -> "_Scanner":
        other = _Scanner()
        other.depth, other.quote, other.continued = self.depth, self.quote, self.continued
        return other

    def at_logical_start(self) -> bool:
        return not (self.depth or self.quote or self.continued)

    def feed(self, body: str) -> int:
        """Advance over one line (without its line break); returns where its code ends."""
        self.continued = False
        index, size, escaped_end = 0, len(body), False
        while index < size:
            char = body[index]
            if self.quote:
                if char == "\\":
                    escaped_end = index + 1 >= size
                    index += 2
                elif body.startswith(self.quote, index):
                    index += len(self.quote)
                    self.quote = ""
                else:
                    index += 1
                continue
            if char == "#":
                return index
            if char in "'\"":
                self.quote = body[index : index + 3] if body[index : index + 3] in ("'''", '"""') else char
                index += len(self.quote)
                continue
            if char in "([{":
                self.depth += 1
            elif char in ")]}":
                self.depth = max(0, self.depth - 1)
            elif char == "\\" and index == size - 1:
                self.continued = True
            index += 1
        if len(self.quote) == 1 and not escaped_end:
            self.quote = ""  # an unterminated one-line string: Python stops there too
        return size
