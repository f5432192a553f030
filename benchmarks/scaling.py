#!/usr/bin/env python3
"""How time and memory grow with the findings in one file (reliability report, R2 and X1).

Writes files holding N copies of buggy training code and runs `graphfix`, `graphfix --diff` and
`graphfix --fix` on each, in a subprocess: wall seconds and the child's peak RSS. Linear growth
means the 4x file takes about 4x the time in every mode. Three kinds of file:

- ``issue``: N copies of issue 26's function (needless ``retain_graph=True`` and ``running_loss +=
  loss``: GF302 and GF301 in each function);
- ``mixed``: many scopes, several rules per scope: that function, one that also never zeroes its
  gradients (GF203, GF301, GF302) and a class whose method keeps a list of losses (GF301, GF302);
- ``notebook``: a .ipynb of N training cells, top-level loops and functions in turn.

    python benchmarks/scaling.py [--kinds issue mixed notebook] [--sizes 25 50 100 200 1000]
    python benchmarks/scaling.py --modes check diff --sizes 1000 --budget 10 300   # exit 1 over budget
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ISSUE = '''
def train_{i}(model, batches, optimizer, criterion):
    running_loss = 0.0
    for inputs, targets in batches:
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        loss.backward(retain_graph=True)
        optimizer.step()
        running_loss += loss
    return running_loss


train_{i}(model, batches, optimizer, criterion)
'''

# the same function without zero_grad (GF203 too), under other names
NEVER_ZEROED = ISSUE.replace("train_", "fit_").replace("        optimizer.zero_grad()\n", "").replace("running_loss", "total")

TRAINER = '''
class Trainer{i}:
    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer

    def epoch(self, batches):
        history = []
        for x, y in batches:
            self.optimizer.zero_grad()
            loss = (self.model(x) - y).pow(2).mean()
            loss.backward(retain_graph=True)
            self.optimizer.step()
            history.append(loss)
        return history


Trainer{i}(model, optimizer).epoch(batches)
'''

CELL_LOOP = '''running_loss_{i} = 0.0
for inputs, targets in batches:
    optimizer.zero_grad()
    loss = criterion(model(inputs), targets)
    loss.backward(retain_graph=True)
    optimizer.step()
    running_loss_{i} += loss
print(running_loss_{i})
'''

# the data, model and optimizer every scope is called with (what makes them data, a module and an
# optimizer to the analysis: facts, not their names)
NOTEBOOK_SETUP = (
    "import torch\nmodel = torch.nn.Linear(4, 1)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "criterion = torch.nn.MSELoss()\nbatches = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]\n"
)
HEADER = NOTEBOOK_SETUP


def generated_source(size: int, kind: str = "mixed") -> str:
    """A module of ``size`` training scopes (``issue``: issue 26's function only)."""
    templates = [ISSUE] if kind == "issue" else [ISSUE, NEVER_ZEROED, TRAINER]
    return HEADER + "".join(templates[i % len(templates)].format(i=i) for i in range(size))


def generated_notebook(size: int) -> str:
    """An nbformat-4 notebook: a setup cell, then ``size`` training cells (a top-level loop, and
    issue 26's function, in turn) with a markdown cell now and then."""
    cells = [_cell("code", NOTEBOOK_SETUP)]
    for i in range(size):
        cells.append(_cell("code", CELL_LOOP.format(i=i) if i % 2 == 0 else ISSUE.lstrip("\n").format(i=i)))
        if i % 5 == 4:
            cells.append(_cell("markdown", f"## Run {i}\n"))
    document = {
        "cells": cells,
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                     "language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(document, indent=1) + "\n"


def _cell(kind: str, text: str) -> dict:
    lines = text.splitlines(keepends=True)
    cell: dict = {"cell_type": kind, "metadata": {}, "source": lines}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


MODES = {"check": [], "diff": ["--diff"], "fix": ["--fix", "--unsafe-fixes"]}


def measured(args: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system) and peak RSS (MiB) of one graphfix run in a child
    process. CPU time is the figure to compare on a shared machine."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "fixer", "--no-cache", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    _, _, usage = os.wait4(child.pid, 0)
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="+", choices=["issue", "mixed", "notebook"], default=["issue", "mixed", "notebook"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[25, 50, 100, 200, 1000])
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--budget", type=float, nargs=2, metavar=("SECONDS", "MIB"),
                        help="exit 1 if a --diff or --fix run takes more CPU seconds or more memory")
    args = parser.parse_args()
    over = []
    print(f"{'kind':>8} {'N':>5} " + " ".join(f"{m + ' s':>9} {m + ' cpu':>10} {m + ' MiB':>10}" for m in args.modes))
    with tempfile.TemporaryDirectory() as folder:
        for kind in args.kinds:
            for size in args.sizes:
                name = f"{kind}_{size}.ipynb" if kind == "notebook" else f"{kind}_{size}.py"
                os.mkdir(os.path.join(folder, name[: name.index(".")]))  # alone: no neighbour is read for callers
                path = os.path.join(folder, name[: name.index(".")], name)
                text = generated_notebook(size) if kind == "notebook" else generated_source(size, kind)
                row = []
                for mode in args.modes:
                    with open(path, "w", encoding="utf-8") as handle:  # --fix rewrote it
                        handle.write(text)
                    seconds, cpu, mib = measured([*MODES[mode], path])
                    row.append(f"{seconds:>9.2f} {cpu:>10.2f} {mib:>10.0f}")
                    if args.budget and mode != "check" and (cpu > args.budget[0] or mib > args.budget[1]):
                        over.append(f"{kind} N={size} {mode}: {seconds:.2f} s wall, {cpu:.2f} s CPU, {mib:.0f} MiB")
                print(f"{kind:>8} {size:>5} " + " ".join(row), flush=True)
    for line in over:
        print(f"over budget: {line}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
