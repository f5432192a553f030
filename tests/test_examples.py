"""The README's first command shows fixes for examples/: every example shows its bug, and after
`graphfix --fix --unsafe-fixes` every one runs cleanly without leaking graphs."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="running the examples needs torch")

from fixer.engine import Options, process_file
from fixer.registry import all_rules
from tests.execution import Runner, describe, is_autograd_error

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.py"))


@pytest.fixture(scope="module")
def fixed(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("examples")
    for path in EXAMPLES:
        shutil.copy(path, folder / path.name)
        result = process_file(str(folder / path.name), Options(rules=all_rules(), fix=True, unsafe=True, write=True))
        assert not result.errors and result.changed, (path.name, result.errors)
    return folder


@pytest.fixture(scope="module")
def runner() -> Iterator[Runner]:
    with Runner(workers=1) as pool:
        yield pool


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_is_fixed(example: Path, fixed: Path, runner: Runner) -> None:
    before, after = runner.run(example), runner.run(fixed / example.name)
    assert after.error is None, describe(after)
    shows_bug = (
        before.error is not None and is_autograd_error(before.error)
        or before.retained_nodes > after.retained_nodes
        or before.state != after.state  # trained to different numbers (optimizer order)
    )
    assert shows_bug, f"{example.name}: the example does not show its bug\n{describe(before)}"
