"""## What it does
Finds `# graphfix: ignore[...]` and `# graphfix: ignore-file[...]` comments that suppress nothing:
a listed rule that reports nothing on that line (or, for `ignore-file`, in that file), an entry
that names no rule, or a bare `# graphfix: ignore` where no rule reports anything. Opt-in, like
ruff's RUF100: select it with `--select GF001` (or `unused-suppression`, or `ALL`).

Each listed rule is judged by running it on the file, whether or not the run selects it, so the
answer does not depend on `--select`: a comment is unused when the rule it names would find
nothing there. A rule that crashes leaves its entries alone. Malformed comments are warnings
of their own (they suppress nothing), and this rule does not touch them.

## Why is this bad?
A stale suppression hides the next real bug written on that line: the code around it changed
(the bug was fixed, the loop rewritten) but the comment still silences the rule. An unknown
entry (a typo such as `GF310`) never suppressed anything, and its author believes it does.

## Example
```python
running_loss += loss.item()  # graphfix: ignore[GF301]
loss.backward()  # graphfix: ignore[GF302, GF999]
```

## Use instead
```python
running_loss += loss.item()
loss.backward()
```
Only the unused entries are removed: `ignore[GF301, GF302]` where only GF301 reports becomes
`ignore[GF301]`; a reason written after the directive as a comment of its own
(`# graphfix: ignore[GF301]  # why`) stays when the directive goes.

## Fix safety
Safe: it only edits comments, so no program behaviour, gradient or parameter can change.
"""

from __future__ import annotations

import re
from typing import Iterator, Optional

from fixer.registry import all_rules
from fixer.rule import Applicability, Diagnostic, Edit, Rule
from fixer.suppress import Directive, suppressions_of


class UnusedSuppression(Rule):
    code = "GF001"
    name = "unused-suppression"
    summary = "A graphfix suppression comment that suppresses nothing"
    fix_safety = "safe"
    default = False
    prefilter = re.compile(rb"graphfix\s*:", re.IGNORECASE)

    def check(self, ctx) -> Iterator[Diagnostic]:
        directives = suppressions_of(ctx).directives
        if not directives:
            return
        findings = _findings_by_rule(ctx, directives)
        for directive in directives:
            yield from self._judge(ctx, directive, findings)

    def _judge(self, ctx, d: Directive, findings: dict[str, Optional[list[Diagnostic]]]) -> Iterator[Diagnostic]:
        def hits(code: str) -> Optional[bool]:
            found = findings.get(code)
            if found is None:  # the rule crashed: cannot judge
                return None
            return any(d.covers(code, f.line, f.end_line) for f in found)

        where = "in this file" if d.file_level else "on this line"
        if d.entries is None:
            answers = [hits(code) for code in findings]
            if None not in answers and not any(answers):
                yield self._remove_directive(ctx, d, f"unused suppression: no rule reports anything {where}")
            return
        unused = [e for e in d.entries if e.code != self.code and (e.code is None or hits(e.code) is False)]
        if not unused:
            return
        reasons = ", ".join(f"`{e.text}`" + (" (no such rule)" if e.code is None else "") for e in unused)
        if len(unused) == len(d.entries):
            yield self._remove_directive(ctx, d, f"unused suppression {reasons}: nothing to suppress {where}")
            return
        kept = ", ".join(e.text for e in d.entries if e not in unused)
        edit = Edit(d.list_span[0], d.list_span[1], kept)
        yield self.diagnostic_at(ctx, d.start, d.end, f"unused suppression {reasons}: nothing to suppress {where}",
                                 [edit], Applicability.SAFE, f"Remove {reasons} from the suppression")

    def _remove_directive(self, ctx, d: Directive, message: str) -> Diagnostic:
        return self.diagnostic_at(ctx, d.start, d.end, message, [_directive_removal(ctx, d)], Applicability.SAFE,
                                  "Remove the unused suppression comment")


def _findings_by_rule(ctx, directives: list[Directive]) -> dict[str, Optional[list[Diagnostic]]]:
    """What each rule a directive depends on reports here, unsuppressed (None: it crashed). A rule
    whose byte pre-filter rejects the file reports nothing, as in a real run."""
    named = {e.code for d in directives if d.entries is not None for e in d.entries if e.code}
    blanket = any(d.entries is None for d in directives)
    data = ctx.source.encode("utf-8", "surrogatepass")
    found: dict[str, Optional[list[Diagnostic]]] = {}
    for rule in all_rules():
        if rule is UnusedSuppression or not (blanket or rule.code in named):
            continue
        try:
            found[rule.code] = list(rule().check(ctx)) if rule.applies_to(data) else []
        except Exception:  # the engine reports the crash when the rule is selected
            found[rule.code] = None
    return found


def _directive_removal(ctx, d: Directive) -> Edit:
    """Delete the directive: with the blank before it when it ends its comment, or up to the next
    ``#`` when a comment follows; a line left empty goes whole."""
    source = ctx.source
    after = source[d.end : d.comment_end]
    if after.strip():  # "# graphfix: ignore[GF301]  # why" keeps "# why"
        return Edit(d.start, d.end + after.index("#"))
    start = d.start
    while start > 0 and source[start - 1] in " \t":
        start -= 1
    line_start = ctx.line_start(d.line)
    if start == line_start:  # the comment was the whole line
        line = ctx.lines[d.line - 1]
        return Edit(line_start, line_start + len(line))
    return Edit(start, d.comment_end)
