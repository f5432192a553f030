"""One checked pass of fixes: which of the chosen fixes are applied, given that a fix must not
bring in a finding (of any rule) that the text before the pass did not have.

All fixes are tried at once, and kept together when what they bring in is only band-aids left
needless (``cleaned_up``: no fix is charged with those); otherwise they are added one by one, in
file order, each kept only if it brings in none (``_Pass.one_by_one``). A rule that fixes a chain
over passes (the link before the one moved is found next) may bring in its own code, as long as it
goes on to fix it: the next pass checks that fix. So may a fix that leaves a band-aid needless (a
``cleans_up`` rule's finding on code the fix did not touch, fixed by that rule in the next pass);
a band-aid the fix itself writes is refused as any other new finding.

Adding fixes one by one re-analyses the whole file once a fix: quadratic in a file of many
findings (issue 26). So the one-by-one order is kept within each *region* (a top-level statement
of the file, or those a fix's edits join), and the regions take their turns together
(``_Pass.by_regions``): turn k tries the k-th fix of every region in one analysis, and a new
finding is charged to the fix tried in its region. That is the one-by-one outcome exactly when
what a region's fixes bring in lies in that region; wherever it does not (a new finding in a
region no fix of the turn is in, or a text without the refused fixes that does not find what the
turn did), the pass starts over one by one. Cost: as many analyses as the most fixes one region
has (twice that where fixes are refused), whatever the number of regions."""

from __future__ import annotations

import bisect
from typing import Callable, Optional, Sequence

from fixer.apply import select_fixes
from fixer.fixcheck import EditMap, Key, Matcher, line_starts, span
from fixer.nodes import parse
from fixer.rule import Diagnostic, Edit


class PassFailed(Exception):
    """A pass of fixes that leaves the file unchanged: the message says why."""


# The analysis of ``current`` with some of the chosen fixes applied: (fixes, their edits) ->
# (new text, its findings). It raises PassFailed if the text does not parse or a rule crashes.
Analyse = Callable[[list[Diagnostic], list[Edit]], tuple[str, list[Diagnostic]]]
Outcome = tuple[str, list[Diagnostic], list[Optional[Diagnostic]], dict[Diagnostic, str]]


class _Trial:
    """The text with a set of fixes applied, its findings, and for each the finding before the
    pass it stands for (None: new) and where it maps back to."""

    def __init__(self, text: str, found: list[Diagnostic], origins: list[tuple[Optional[Diagnostic], Key]],
                 edits: list[Edit]) -> None:
        self.text, self.found, self.origins, self.edits = text, found, origins, edits
        self._written: Optional[EditMap] = None
        self._starts: Optional[list[int]] = None

    def new_keys(self) -> set[Key]:
        return {key for old, key in self.origins if old is None}

    def untouched(self, diagnostic: Diagnostic) -> bool:
        """The finding's text neither lies in nor touches what the trial's edits wrote: they
        changed what is around it (made a band-aid needless), not it."""
        if self._written is None:
            self._written, self._starts = EditMap(self.edits), line_starts(self.text)
        return not self._written.writes_into(*span(diagnostic, self._starts))


class _Pass:
    def __init__(self, current: str, before: list[Diagnostic], chosen: list[Diagnostic], unsafe: bool,
                 cleanups: set[str], analyse: Analyse) -> None:
        self.current, self.before, self.chosen = current, before, chosen
        self.unsafe, self.cleanups, self.analyse = unsafe, cleanups, analyse
        self.matcher = Matcher(current, before)
        self.full: Optional[_Trial] = None
        self.start = _Trial(current, before, [(d, None) for d in before], [])

    def trial(self, indices: Sequence[int]) -> _Trial:
        if self.full is not None and len(indices) == len(self.chosen):
            return self.full
        fixes = [self.chosen[i] for i in sorted(indices)]
        edits = [edit for d in fixes for edit in d.fix.edits]
        new, found = self.analyse(fixes, edits)
        return _Trial(new, found, self.matcher.origins(new, found, edits), edits)

    def introduces(self, diagnostic: Diagnostic, fixing: Diagnostic, trial: _Trial) -> bool:
        """Whether the new finding ``diagnostic`` of ``trial`` counts against ``fixing``'s fix."""
        if diagnostic.code != fixing.code:
            return not self.cleaned_up(diagnostic, trial)
        return not select_fixes([diagnostic], self.unsafe)

    def run(self) -> Outcome:
        self.full = self.trial(range(len(self.chosen)))
        if all(old is not None or self.cleaned_up(d, self.full) for d, (old, _) in zip(self.full.found, self.full.origins)):
            return _outcome(self.full, {})
        return self.by_regions() or self.one_by_one()

    def cleaned_up(self, diagnostic: Diagnostic, trial: _Trial) -> bool:
        """A new finding no fix can be charged with: a band-aid the fixes left needless, on code
        they did not write, that its rule fixes in the next pass."""
        return diagnostic.code in self.cleanups and trial.untouched(diagnostic) and bool(select_fixes([diagnostic], self.unsafe))

    def one_by_one(self) -> Outcome:
        outcome, accepted, refusals = self.start, [], {}
        for index, diagnostic in enumerate(self.chosen):
            trial = self.trial([*accepted, index])
            earlier = outcome.new_keys()  # brought in by the fixes kept so far
            introduced = [
                d for d, (old, key) in zip(trial.found, trial.origins)
                if old is None and key not in earlier and self.introduces(d, diagnostic, trial)
            ]
            if introduced:
                refusals[diagnostic] = _refusal(diagnostic, introduced[0])
            else:
                outcome, accepted = trial, [*accepted, index]
        return _outcome(outcome, refusals)

    def by_regions(self) -> Optional[Outcome]:
        """The one-by-one outcome, region by region in turns; None where the regions turn out not
        to be independent."""
        regions = _Regions(self.current)
        groups = regions.group([d.fix.edits for d in self.chosen])
        outcome, accepted, refusals = self.start, [], {}
        for turn in range(max(len(members) for members in groups.values())):
            tried = {group: members[turn] for group, members in groups.items() if turn < len(members)}
            accepted_before = list(accepted)
            trial = self.trial([*accepted, *tried.values()])
            earlier = outcome.new_keys()
            introduced: dict[int, Diagnostic] = {}  # group -> the first finding its fix brings in
            brought: dict[int, set[Key]] = {}  # group -> the new findings of the turn there
            for d, (old, key) in zip(trial.found, trial.origins):
                if old is not None or key in earlier:
                    continue
                group = regions.group_at(key[1][0])
                if group not in tried:
                    return None  # a finding no fix of its region brought in
                brought.setdefault(group, set()).add(key)
                if group not in introduced and self.introduces(d, self.chosen[tried[group]], trial):
                    introduced[group] = d
            for group, d in introduced.items():
                refusals[self.chosen[tried[group]]] = _refusal(self.chosen[tried[group]], d)
            kept = [group for group in tried if group not in introduced]
            accepted += [tried[group] for group in kept]
            if introduced:  # the text without the refused fixes finds what the turn found in the other regions
                without = self.trial(accepted)
                if without.new_keys() - earlier != {key for group in kept for key in brought.get(group, ())}:
                    return None
                outcome = without
            else:
                outcome = trial
            if brought and len(brought) < len(tried):  # the fixes of the regions with new findings bring them in alone
                alone = self.trial([*accepted_before, *(tried[group] for group in brought)])
                if alone.new_keys() - earlier != {key for keys in brought.values() for key in keys}:
                    return None
        return _outcome(outcome, refusals)


class _Regions:
    """The top-level statements of a text as regions: offsets to regions, and regions joined into
    groups where a fix's edits lie in more than one."""

    def __init__(self, text: str) -> None:
        starts = line_starts(text)
        tree = parse(text)
        self._starts = [
            min([starts[s.lineno - 1] + s.col_offset]
                + [starts[d.lineno - 1] + d.col_offset for d in getattr(s, "decorator_list", ())])
            for s in tree.body
        ]
        self._group: dict[int, int] = {}  # region -> group

    def region(self, offset: int) -> int:
        return bisect.bisect_right(self._starts, offset) - 1  # -1: before the first statement

    def group(self, fixes: list[Sequence[Edit]]) -> dict[int, list[int]]:
        """Fix indices by group, each in order; a group is the regions some fixes' edits join."""
        parent: dict[int, int] = {}

        def root(region: int) -> int:
            while parent.setdefault(region, region) != region:
                region = parent[region]
            return region

        touched = []
        for edits in fixes:
            regions = sorted({self.region(o) for e in edits for o in (e.start, max(e.start, e.end - 1))})
            for other in regions[1:]:
                parent[root(other)] = root(regions[0])
            touched.append(regions[0] if regions else -1)
        members: dict[int, list[int]] = {}
        for index, region in enumerate(touched):
            members.setdefault(root(region), []).append(index)
        self._group = {region: root(region) for region in parent}
        return members

    def group_at(self, offset: int) -> Optional[int]:
        return self._group.get(self.region(offset))


def _refusal(diagnostic: Diagnostic, first: Diagnostic) -> str:
    return (
        f"{diagnostic.code}'s fix (line {diagnostic.line}) would introduce {first.code} ({first.name}) "
        f"at line {first.line}; not applied"
    )


def _outcome(trial: _Trial, refusals: dict[Diagnostic, str]) -> Outcome:
    return trial.text, trial.found, [old for old, _ in trial.origins], refusals


def checked_pass(current: str, before: list[Diagnostic], chosen: list[Diagnostic], unsafe: bool,
                 cleanups: set[str], analyse: Analyse) -> Outcome:
    """Apply the ``chosen`` fixes to ``current`` (whose findings are ``before``). Returns the new
    text, its findings, the finding of ``current`` each one stands for (None: new) and the fixes
    refused because they bring in a new finding, with why."""
    return _Pass(current, before, chosen, unsafe, cleanups, analyse).run()
