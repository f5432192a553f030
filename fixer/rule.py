"""What a rule is and what it reports: rules report, the engine edits."""

from __future__ import annotations

import ast
import enum
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Iterable, Iterator, Optional, Sequence

if TYPE_CHECKING:
    from fixer.context import FileContext


class Applicability(enum.Enum):
    """ruff's split: safe fixes are applied by default, unsafe ones need --unsafe-fixes."""

    SAFE = "safe"
    UNSAFE = "unsafe"


@dataclass(frozen=True, order=True)
class Edit:
    """Replace source[start:end] (character offsets) with text."""

    start: int
    end: int
    text: str = ""
    # 1-based (row, column) of start and end, filled in by Rule.diagnostic for reporters
    location: tuple[int, int] = field(default=(0, 0), compare=False)
    end_location: tuple[int, int] = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class Fix:
    edits: tuple[Edit, ...]
    applicability: Applicability
    title: str = ""


@dataclass(frozen=True)
class Diagnostic:
    code: str
    name: str
    message: str
    line: int  # 1-based
    col: int  # 0-based, characters
    end_line: int
    end_col: int
    fix: Optional[Fix] = None
    cell: Optional[int] = None  # notebooks: the 1-based cell; line and end_line count within it
    fix_refused: str = field(default="", compare=False)  # why the engine did not apply this finding's fix

    @property
    def sort_key(self) -> tuple[int, int, int, str]:
        return (self.cell or 0, self.line, self.col, self.code)


# A call that backpropagates: x.backward(...), torch.autograd.grad/backward, an imported `grad`,
# Lightning's manual_backward. `def backward(ctx, ...)` of an autograd.Function does not match.
BACKWARD_ALTERNATIVES = (rb"\.backward\s*\(", rb"autograd\.(?:grad|backward)\b", rb"manual_backward", rb"import[^\n#]*\bgrad\b")
BACKWARD_CALL = re.compile(b"|".join(BACKWARD_ALTERNATIVES))
# BACKWARD_CALL's alternatives one by one: each starts with a literal, which re finds at memchr speed
# (an alternation is tried at every byte), about twice as fast on a tree like torch's.
BACKWARD_PARTS = tuple(re.compile(part) for part in BACKWARD_ALTERNATIVES)


def has_backward_call(data: bytes) -> bool:
    """``BACKWARD_CALL`` matches on a line of code: not on a comment line, nor on a doctest line
    of a docstring (``>>> loss.backward()``), where libraries mention it most. Fast: substring
    tests first, then each alternative alone; the last file's answer is kept (rules with their
    own pre-filter built on this one ask again)."""
    if b"backward" not in data and b"autograd" not in data:
        return False
    if _last_answer and _last_answer[0] is data:
        return _last_answer[1]
    _last_answer[:] = [data, _scan_backward(data)]
    return _last_answer[1]


_last_answer: list = []


def _scan_backward(data: bytes) -> bool:
    for part in BACKWARD_PARTS:
        for match in part.finditer(data):
            line = max(data.rfind(b"\n", 0, match.start()), data.rfind(b"\r", 0, match.start())) + 1  # CR-only too
            if not data[line : match.start()].lstrip(b" \t").startswith(NOT_CODE):
                return True
    return False


NOT_CODE = (b"#", b">>>", b"...")  # a line starting so is a comment or a doctest line (never code
# that calls backward: ``...`` would be an Ellipsis statement)


CODE_RE = re.compile(r"^GF\d{3}$")  # the hundreds digit is the family; 0xx: about graphfix's own comments
# Every rule's documentation: the generated rules page, one anchor per code (docs/rules.md#gf301).
# graphfix has no hosted documentation, so no output names a web address: a local report (JSON,
# the language server) links the page where it is on disk (a checkout or an editable install),
# else gives no link; `graphfix explain GF301` prints the same text anywhere.
RULES_PAGE = Path(__file__).resolve().parent.parent / "docs" / "rules.md"
_PAGE_URI = RULES_PAGE.as_uri() if RULES_PAGE.is_file() else None


def rule_url(code: str) -> Optional[str]:
    """``file:///.../docs/rules.md#gf301`` where the rules page is on disk, else None."""
    return f"{_PAGE_URI}#{code.lower()}" if _PAGE_URI else None
NAME_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)+$")
DOC_HEADINGS = ("## What it does", "## Why is this bad?", "## Example", "## Use instead", "## Fix safety")


class Rule:
    """Base class. A subclass lives in its own module in ``codemods/``; its module docstring is its
    documentation. ``prefilter`` is a bytes regex: a file that does not match is never parsed for
    this rule."""

    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]  # one line, for `graphfix rules`
    fix_safety: ClassVar[str] = "none"  # "safe", "unsafe", "mixed" (per finding) or "none"
    prefilter: ClassVar[re.Pattern[bytes]] = BACKWARD_CALL
    # a literal the file must hold besides the prefilter's match (a bug that needs a class beside the
    # training loop: b"def __init__"); the import of a step function stands in for a backward call only here
    also_needs: ClassVar[bytes] = b""
    documentation: ClassVar[str] = ""
    default: ClassVar[bool] = True  # False: opt-in, runs only when selected (by code, prefix, name or ALL)
    # True: a finding of this rule can be what another fix leaves behind (a band-aid made needless),
    # which the next pass removes with this rule's own fix; such a fix is not refused for it.
    cleans_up: ClassVar[bool] = False

    @classmethod
    def applies_to(cls, data: bytes) -> bool:
        """The cheap byte-level pre-filter: False means the file cannot hold this bug and is not
        parsed for it. Override when a single regex is too coarse."""
        if cls.also_needs not in data:
            return False
        if cls.prefilter is BACKWARD_CALL:
            return has_backward_call(data)
        return cls.prefilter.search(data) is not None

    def check(self, ctx: "FileContext") -> Iterable[Diagnostic]:
        raise NotImplementedError

    def diagnostic(
        self,
        ctx: "FileContext",
        node: ast.AST,
        message: str,
        edits: Sequence[Edit] = (),
        applicability: Applicability = Applicability.SAFE,
        title: str = "",
    ) -> Diagnostic:
        """A diagnostic at ``node``; ``edits`` (if any) form its fix."""
        return self._diagnostic(ctx, ctx.position(node), message, edits, applicability, title)

    def diagnostic_at(
        self, ctx: "FileContext", start: int, end: int, message: str, edits: Sequence[Edit] = (),
        applicability: Applicability = Applicability.SAFE, title: str = "",
    ) -> Diagnostic:
        """A diagnostic at source offsets ``start``..``end`` (for what has no AST node: comments)."""
        (line, col), (end_line, end_col) = ctx.row_col(start), ctx.row_col(end)
        return self._diagnostic(ctx, (line, col - 1, end_line, end_col - 1), message, edits, applicability, title)

    def _diagnostic(self, ctx, position, message, edits, applicability, title) -> Diagnostic:
        located = [Edit(e.start, e.end, e.text, ctx.row_col(e.start), ctx.row_col(e.end)) for e in edits]
        fix = Fix(tuple(sorted(located)), applicability, title) if edits else None
        return Diagnostic(self.code, self.name, one_line(message), *position, fix)


_LINE_BREAK_IN_CODE = re.compile(r"[ \t]*\\?[ \t]*(?:\r\n|\r|\n)\s*")


def one_line(message: str) -> str:
    """Messages quote source code; a quoted statement continued over lines (``\\`` or brackets)
    is joined into one line so every output format keeps one diagnostic per line."""
    return _LINE_BREAK_IN_CODE.sub(" ", message)


def iter_rule_classes(namespace: dict) -> Iterator[type[Rule]]:
    for value in namespace.values():
        if isinstance(value, type) and issubclass(value, Rule) and value is not Rule and value.__dict__.get("code"):
            yield value
