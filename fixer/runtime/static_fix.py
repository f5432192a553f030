"""``graphfix run --diff``: where the static rule named by a runtime finding reports the same
line, its fix is the fix to show (the runtime evidence confirms the static proof). Where it does
not, the finding says in words what to change; handing the evidence to the rules so that they
can fix what they could not prove is the next step (see the README)."""

from __future__ import annotations

from typing import Optional

from fixer.diff import unified_diff
from fixer.engine import Options, process_file
from fixer.registry import by_code
from fixer.runtime.report import Finding


def static_diff(finding: Finding) -> Optional[str]:
    """The unified diff of the finding's rule on the finding's file, if that rule reports the
    finding's line with a fix (safe or unsafe: the run proved the bug), else None."""
    try:
        rule = by_code(finding.code)
    except KeyError:
        return None
    result = process_file(finding.filename, Options(rules=(rule,), fix=True, unsafe=True))
    agrees = any(d.line == finding.line and d.fix is not None for d in result.diagnostics)
    if not agrees or not result.changed:
        return None
    return unified_diff(result.path, result.original, result.fixed)
