"""The decisions of ``--fix --interactive`` on one file, without a terminal: which fixes are
offered, in which order, and the text with only the accepted ones, checked as ``--fix`` checks
its own fixes (it re-parses, and a fix that brings in a new finding is refused: fixer/engine.py).

One hunk is one finding's fix (all its edits). A round offers the fixable findings of the text in
file order; a fix that overlaps one accepted in the round is not offered. The accepted fixes are
then applied together and checked. A finding the accepted fixes bring in (a rule that fixes a
chain link by link) or one whose fix was held back by an overlap and still has a fix is offered
in the next round; a finding the user declined, or whose fix was refused, is never offered again."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import Callable, Optional, Sequence

from fixer.apply import select_fixes
from fixer.engine import MAX_PASSES, Options, PassFailed, checked_pass
from fixer.rule import Diagnostic, Rule


class Answer(enum.Enum):
    YES = "y"  # apply this fix
    NO = "n"  # skip it
    ALL = "a"  # apply this one and every later fix of the file
    DONE = "d"  # skip this one and every later fix of the file
    QUIT = "q"  # skip this one and everything after it; what was accepted is still written


@dataclass
class Tally:
    """What the user decided, over the whole run."""

    accepted: int = 0
    skipped: int = 0  # answered n, or not applied after d or q in its file
    refused: int = 0  # accepted, but the check refused them: they would break the code or bring in a finding
    quit: bool = False


# ask(finding, text it applies to, its number in the round, how many the round offers) -> answer
Ask = Callable[[Diagnostic, str, int, int], Answer]
Note = Callable[[str], None]


def choose(candidates: Sequence[Diagnostic], text: str, ask: Ask, tally: Tally, mode: Optional[Answer], note: Note) -> tuple[list[Diagnostic], list[Diagnostic], Optional[Answer]]:
    """Offer ``candidates`` (fixable findings of ``text``) in file order. Returns the accepted
    ones, the declined ones, and the file's mode afterwards: ALL (accept the rest), DONE or QUIT
    (skip the rest), or None (keep asking). A fix that overlaps an accepted one is neither: it is
    not offered, and comes back in a later round if it still applies then."""
    accepted: list[Diagnostic] = []
    declined: list[Diagnostic] = []
    ordered = sorted(candidates, key=lambda d: d.sort_key)
    for number, diagnostic in enumerate(ordered, 1):
        if mode in (Answer.DONE, Answer.QUIT):
            declined.append(diagnostic)
            tally.skipped += 1
            continue
        if not compatible(accepted, diagnostic):
            note(f"{diagnostic.code} (line {diagnostic.line}): its fix overlaps one accepted above; not offered now")
            continue
        answer = Answer.ALL if mode is Answer.ALL else ask(diagnostic, text, number, len(ordered))
        if answer in (Answer.YES, Answer.ALL):
            accepted.append(diagnostic)
            tally.accepted += 1
        else:
            declined.append(diagnostic)
            tally.skipped += 1
        if answer in (Answer.ALL, Answer.DONE, Answer.QUIT):
            mode = answer
    tally.quit = tally.quit or mode is Answer.QUIT
    return accepted, declined, mode


def compatible(accepted: Sequence[Diagnostic], diagnostic: Diagnostic) -> bool:
    """Whether ``diagnostic``'s fix can join the ``accepted`` ones (earlier in the file): no edit
    overlaps theirs, nor one of its own (the applier's own test)."""
    return len(select_fixes([*accepted, diagnostic], unsafe=True)) == len(accepted) + 1


@dataclass
class Reviewed:
    text: str  # the text with the accepted fixes (the original if none)
    findings: list[Diagnostic]  # the findings of ``text``; a refused fix's finding says why
    problems: list[str] = field(default_factory=list)  # a check that failed: the round's fixes were not applied


def review(
    path: str, text: str, findings: list[Diagnostic], options: Options, newline: str, rules: Sequence[type[Rule]],
    ask: Ask, tally: Tally, note: Note,
) -> Reviewed:
    """Round after round (at most MAX_PASSES, like --fix): offer, apply the accepted fixes, check."""
    rules = list(rules)
    declined: set[Diagnostic] = set()  # findings of ``text`` the user said no to
    refused: dict[Diagnostic, str] = {}  # ... and those whose fix was refused, with why
    mode: Optional[Answer] = None
    problems: list[str] = []
    for _ in range(MAX_PASSES):
        candidates = [d for d in select_all(findings, options.unsafe) if d not in declined and d not in refused]
        if not candidates or mode in (Answer.DONE, Answer.QUIT):
            break
        accepted, no, mode = choose(candidates, text, ask, tally, mode, note)
        declined.update(no)
        if not accepted:
            break
        try:
            new, found, origins, refusals = checked_pass(path, text, findings, accepted, options, newline, rules)
        except PassFailed as exc:
            problems.append(str(exc).replace("file left unchanged", "these fixes were not applied"))
            note(problems[-1])
            tally.accepted, tally.refused = tally.accepted - len(accepted), tally.refused + len(accepted)
            break
        for why in refusals.values():
            note(why)
        tally.accepted, tally.refused = tally.accepted - len(refusals), tally.refused + len(refusals)
        refused.update(refusals)
        declined = {d for d, old in zip(found, origins) if old in declined}
        refused = {d: refused[old] for d, old in zip(found, origins) if old in refused}
        text, findings = new, found
    kept = [replace(d, fix=None, fix_refused=refused[d]) if d in refused else d for d in findings]
    return Reviewed(text, kept, problems)


def select_all(findings: Sequence[Diagnostic], unsafe: bool) -> list[Diagnostic]:
    """Every finding whose fix this run may apply, overlapping or not, in file order."""
    return [d for d in sorted(findings, key=lambda d: d.sort_key) if d.fix and (unsafe or d.fix.applicability.value == "safe")]
