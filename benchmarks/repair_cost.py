"""What a repair costs: ``graphfix run --fix`` timed against the plain run of the same program.

    python benchmarks/repair_cost.py [PROGRAM.py ...] [--steps 300]

Each program is copied to a fresh folder (its expert version, ``NAME.expert.py``, is left out),
run plainly once, then repaired by ``graphfix run --fix`` (wall time, the whole repair: the
sanitized first run, every candidate's re-run, the report). Without programs: the repair kinds'
programs of tests/repair_programs/ and a carried-state loop sized to run about 3 s plainly on
this machine's two cores (``--steps``). Goal (issue 23): the repair of a 3-second program in under
60 s on 2 cores."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "tests" / "repair_programs"
CARRIED = """\
import torch

torch.manual_seed(0)
cell = torch.nn.GRUCell(64, 128)
head = torch.nn.Linear(128, 64)
opt = torch.optim.Adam([*cell.parameters(), *head.parameters()], lr=1e-3)
h = torch.zeros(32, 128)
for step in range({steps}):
    x = torch.randn(32, 64)
    h = cell(x, h)
    loss = (head(h) - x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("loss", loss.item())
"""


def _timed(command: list[str], cwd: str) -> tuple[float, int, str]:
    began = time.monotonic()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    return time.monotonic() - began, done.returncode, done.stderr


def measure(program: Path) -> tuple[float, float, int, str]:
    folder = tempfile.mkdtemp(prefix="graphfix-cost-")
    try:
        path = Path(folder) / program.name
        shutil.copyfile(program, path)
        for package in program.parent.iterdir():  # the packages a program imports (outputs_handed_to_hooks: hooks/)
            if package.is_dir() and (package / "__init__.py").is_file():
                shutil.copytree(package, Path(folder) / package.name)
        fixed_copy = Path(folder) / f"plain-{program.name}"
        shutil.copyfile(program, fixed_copy)
        plain, _, _ = _timed([sys.executable, fixed_copy.name], folder)
        repair, code, err = _timed([sys.executable, "-m", "fixer", "run", "--fix", path.name], folder)
        tried = sum(": tried " in line for line in err.splitlines())
        last = next((line for line in reversed(err.splitlines()) if "fixed" in line), "")
        return plain, repair, tried, last[:100] if code == 0 else f"rc {code}: {last[:90]}"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="*", type=Path)
    parser.add_argument("--steps", type=int, default=300, help="iterations of the built-in carried-state loop")
    options = parser.parse_args()
    programs = options.programs
    scratch = None
    if not programs:
        scratch = Path(tempfile.mkdtemp(prefix="graphfix-cost-src-"))
        (scratch / "carried_gru.py").write_text(CARRIED.format(steps=options.steps), encoding="utf-8")
        programs = [scratch / "carried_gru.py"] + sorted(p for p in PROGRAMS.glob("*.py") if not p.name.endswith(".expert.py"))
    print(f"{'program':<28} {'plain s':>8} {'--fix s':>8} {'tried':>6}  result")
    try:
        for program in programs:
            plain, repair, tried, result = measure(program)
            print(f"{program.stem:<28} {plain:8.1f} {repair:8.1f} {tried:6d}  {result}")
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
