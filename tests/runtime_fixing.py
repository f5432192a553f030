"""``graphfix run --fix`` on a fixture program, in a worker process: the program is copied to a
fresh folder, run under the sanitizer, repaired from the run's evidence (the candidates tried in
turn, each verified by a re-run in this process, seeds reset, as ``graphfix run`` would in a
fresh one: fixer.runtime.repair.trial) and, when the repair is kept,
measured by the execution harness against the expert's program (``.oracle.py``, else ``.after.py``)."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

# One iteration of a loop carrying ``h`` through ``ops["step"]``, a call static analysis cannot
# see into: the run fails at the second iteration (GF101) and the fix detaches ``h``. Unindented.
CARRIED_ITERATION = """\
x = torch.randn(4)
h = ops["step"](x, h)
loss = h.pow(2).sum()
opt.zero_grad()
loss.backward()
opt.step()
"""


@dataclass(frozen=True)
class Fixed:
    codes: tuple  # the runtime findings' codes
    kept: bool  # a fix was written and the re-run proved it
    what: str  # the verification's sentence, or why there was no fix
    difference: Optional[str] = None  # against the expert's numbers: None when they agree
    fixed_text: str = ""


def _execute(path: str, max_steps: Optional[int] = None):
    from tests.sanitized import execute_quietly

    return execute_quietly(path, max_steps=max_steps, gradients=True)[0]


def fix_program(before: str, expert: Optional[str] = None) -> Fixed:
    from fixer.runtime.repair.report import say
    from fixer.runtime.repair.trial import repair
    from fixer.runtime.static_fix import propose
    from fixer.runtime.verify import Summary
    from tests.execution import compare_states, run_program

    folder = tempfile.mkdtemp(prefix="graphfix-fix-")
    try:
        path = os.path.join(folder, Path(before).name)
        shutil.copyfile(before, path)
        for package in Path(before).parent.iterdir():  # the fixture folder's packages the program imports
            if package.is_dir() and package.name.isidentifier() and package.name != "__pycache__" and any(package.glob("*.py")):
                shutil.copytree(package, os.path.join(folder, package.name))
        first = _execute(path)
        codes = tuple(f.code for f in first.findings)
        if not first.findings:
            return Fixed(codes, False, "no finding")
        proposals = propose(first.findings)
        result = repair(first, proposals, lambda steps: lambda: Summary.of(_execute(path, steps)), None, lambda _: True)
        kept, what = result.kept, " | ".join(say(result, first, proposals))
        text = Path(path).read_text(encoding="utf-8")
        if not kept or expert is None:
            return Fixed(codes, kept, what, fixed_text=text)
        fixed, reference = run_program(path), run_program(expert)
        difference = f"raised {fixed.error}" if fixed.error else compare_states(reference.state, fixed.state)
        return Fixed(codes, True, what, difference, text)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
