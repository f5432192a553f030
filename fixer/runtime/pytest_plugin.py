"""pytest plugin (entry point ``pytest11``): ``pytest --graphfix-run`` runs each test under the
sanitizer. A test that fails on an autograd graph bug gets the diagnosis appended to its report;
a passing test whose run produced a finding (an error it caught, or a non-fatal finding) gets it
as a report section, and fails with ``--graphfix-strict``. Without the option nothing is imported
(not torch, not the recorder) and no test is touched."""

from __future__ import annotations

from typing import Any

import pytest

KEY = pytest.StashKey[list]()


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("graphfix", "autograd sanitizer (graphfix run)")
    group.addoption("--graphfix-run", action="store_true", help="run every test under graphfix's autograd sanitizer and report its findings per test")
    group.addoption("--graphfix-strict", action="store_true", help="with --graphfix-run: fail a passing test whose run produced a finding")


def pytest_configure(config: Any) -> None:
    if config.getoption("graphfix_strict") and not config.getoption("graphfix_run"):
        raise pytest.UsageError("--graphfix-strict needs --graphfix-run")
    if config.getoption("graphfix_run"):
        from fixer.runtime import TorchMissing, require_torch

        try:
            require_torch()
        except TorchMissing as exc:
            raise pytest.UsageError(str(exc)) from None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: Any):
    if not item.config.getoption("graphfix_run"):
        yield
        return
    from fixer.runtime.session import Session

    session = Session()
    with session:
        yield
    item.stash[KEY] = session.findings + [_failure(f) for f in session.failures]


def _failure(text: str) -> str:
    return f"graphfix: internal error while diagnosing: {text}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any):
    outcome = yield
    report = outcome.get_result()
    found = item.stash.get(KEY, None) if report.when == "call" else None
    if not found:
        return
    from fixer.runtime.report import text_lines

    findings = [f for f in found if not isinstance(f, str)]
    text = "\n".join(text_lines(findings) + [f for f in found if isinstance(f, str)])
    if report.failed:
        report.longrepr = f"{report.longrepr}\n\ngraphfix run: the failure is an autograd graph bug:\n{text}"
    elif findings and item.config.getoption("graphfix_strict"):
        report.outcome = "failed"
        report.longrepr = f"graphfix run (--graphfix-strict): the test passed, but its run produced:\n{text}"
    else:
        report.sections.append(("graphfix run", text))  # shown with -rA / -rP
