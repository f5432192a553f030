#!/usr/bin/env python3
"""How time grows with the findings in one file (reliability report, R2).

Writes files holding N copies of a buggy training function (one GF301 finding each) and times
`graphfix`, `graphfix --diff` and `graphfix --fix` on each, in a subprocess. Linear growth means
the 4x file takes about 4x the time in every mode.

    python benchmarks/scaling.py [--sizes 1000 4000]
"""
import argparse
import os
import resource
import subprocess
import sys
import tempfile

FUNCTION = '''
def train{i}(model, loader, optimizer):
    running_loss = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
        running_loss += loss
    return running_loss
'''


def timed(args: list[str]) -> float:
    """CPU seconds of a graphfix run (user + system of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "fixer", *args], capture_output=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 4000])
    sizes = parser.parse_args().sizes
    print(f"{'functions':>9} {'report':>8} {'--diff':>8} {'--fix':>8}  (CPU seconds)")
    with tempfile.TemporaryDirectory() as folder:
        for size in sizes:
            path = os.path.join(folder, f"many_{size}.py")
            text = "import torch\n" + "".join(FUNCTION.format(i=i) for i in range(size))
            with open(path, "w") as handle:
                handle.write(text)
            report, diff = timed(["--no-cache", path]), timed(["--no-cache", "--diff", path])
            fix = timed(["--no-cache", "--fix", path])
            print(f"{size:>9} {report:>8.1f} {diff:>8.1f} {fix:>8.1f}")


if __name__ == "__main__":
    main()
