"""From a run's evidence to a fix: ``graphfix run --diff`` / ``--fix``.

The run hands its facts to the static rules (``fixer.analysis.evidence``): the lines where it saw
the crossed value's graph built count as building a graph even where the call cannot be seen
into, so the rule named by the finding can prove, and fix, what the text alone did not show. A
rule's fix answers a runtime finding when the rule reports it at one of the places the run names
(built, stored, used, freed, failed). Where no rule writes the edit, the finding's own words say
what to change, and where."""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Optional

from fixer.analysis.evidence import runtime_evidence
from fixer.diff import display_path, unified_diff
from fixer.engine import FileResult, Options, process_file
from fixer.registry import all_rules, by_code
from fixer.runtime.project import Project
from fixer.runtime.report import Finding

BUILT = ("built", "shared part built")  # roles whose line built the value whose graph was freed


@dataclass
class Proposal:
    """The fix of one file: its text before and after, the findings it answers, and the words
    for those no rule could fix."""

    filename: str
    original: Optional[str] = None
    fixed: Optional[str] = None
    answered: list[Finding] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)

    @property
    def diff(self) -> str:
        return unified_diff(self.filename, self.original, self.fixed) if self.fixed is not None else ""


def propose(findings: list[Finding]) -> list[Proposal]:
    """One proposal per file holding a finding, in the order of the findings."""
    graph_lines: dict[str, set[int]] = defaultdict(set)
    for finding in findings:
        for piece in finding.evidence:
            if piece.role in BUILT:
                graph_lines[piece.filename].add(piece.line)
    by_file: dict[str, list[Finding]] = {}
    for finding in findings:
        by_file.setdefault(finding.filename, []).append(finding)
    with runtime_evidence(graph_lines):
        return [_propose(filename, found) for filename, found in by_file.items()]


def inside(proposals: list[Proposal], project: Project) -> list[Proposal]:
    """The proposals, those for files outside ``project`` turned into words: ``run --fix``
    never writes another project's files (an editable install, a folder on ``sys.path``)."""
    kept = []
    for proposal in proposals:
        if proposal.fixed is None or project.holds(proposal.filename):
            kept.append(proposal)
            continue
        why = f"the file lies outside the program's project ({display_path(project.root)}), so it is not changed"
        words = [advice(f, why) for f in proposal.answered]
        kept.append(Proposal(proposal.filename, advice=words + proposal.advice))
    return kept


def _propose(filename: str, findings: list[Finding]) -> Proposal:
    """The fix of the findings' own rules; for a finding none of them answers, of a rule of the
    same family (the run's cause is a judgement; the place it names is a fact: a GAN's output
    reused after the generator's step is GF105 to the run and GF103 to the text)."""
    proposal = Proposal(filename)
    own = {code: by_code(code) for code in _codes(findings)}
    family = {code: by_code(code) for code in _codes(findings, family=True)}
    for rules in (own, family):
        result = process_file(filename, Options(rules=tuple(rules.values()), fix=True, unsafe=True)) if rules else FileResult(filename)
        if result.changed and not result.errors:
            answered = [f for f in findings if _answers(result, f, tuple(rules))]
            if len(answered) > len(proposal.answered):
                proposal.answered, proposal.original, proposal.fixed = answered, result.original, result.fixed
    proposal.advice = [advice(f) for f in findings if f not in proposal.answered]
    return proposal


def _codes(findings: list[Finding], family: bool = False) -> list[str]:
    """The findings' codes known to the registry, or every code of their families (GF1xx)."""
    wanted = {f.code[:3] if family else f.code for f in findings}
    return sorted(r.code for r in all_rules() if (r.code[:3] if family else r.code) in wanted)


def _answers(result: FileResult, finding: Finding, codes: tuple[str, ...]) -> bool:
    """One of ``codes`` reports, with a fix the engine applied, one of the places the run names."""
    here = os.path.abspath(finding.filename)
    places = {finding.line} | {p.line for p in finding.evidence if os.path.abspath(p.filename) == here}
    fixes = [d for d in result.diagnostics if d.code in codes and d.fix is not None and any(d.line <= n <= d.end_line for n in places)]
    refused = {d.code for d in result.remaining if d.fix_refused}
    return any(d.code not in refused for d in fixes)  # a refused fix of that rule: which one is not worth guessing


def advice(finding: Finding, why: str = "no rule can write this edit") -> str:
    """What to change, and where, in words: the instruction that ends the finding's message."""
    instruction = finding.message.rsplit(": ", 1)[-1]
    places = "; ".join(f"{p.role} at line {p.line}: {p.source}" for p in finding.evidence if p.role not in ("failed", "freed by"))
    return (
        f"{display_path(finding.filename)}:{finding.line}: {finding.code}: {why}; "
        f"change it by hand: {instruction} ({places})"
    )

