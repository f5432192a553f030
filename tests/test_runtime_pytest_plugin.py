"""The pytest plugin (``--graphfix-run``), run in pytester sandboxes."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("torch", reason="the plugin sanitizes tests that use torch")
# optimizer.step() imports torch._dynamo on first use; pytester's in-process runs forget modules
# imported during a run, and torch's operator registry cannot take a second import
import torch._dynamo  # noqa: E402,F401

pytest_plugins = ["pytester"]

TESTS = """
import pytest
import torch


def test_reused_graph():
    w = torch.ones(3, requires_grad=True)
    hidden = (w * w).exp()
    for _ in range(2):
        hidden.sum().backward()


def test_clean():
    w = torch.ones(3, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        (w * 2).exp().sum().backward()
        opt.step()


def test_expects_the_error():
    w = torch.ones(3, requires_grad=True)
    hidden = (w * w).exp()
    hidden.sum().backward()
    with pytest.raises(RuntimeError):
        hidden.sum().backward()


def test_unrelated_failure():
    assert torch.ones(1).item() == 2
"""


def run(pytester, *args):
    from importlib.metadata import entry_points

    pytester.makepyfile(test_training=TESTS)
    installed = any(e.value == "fixer.runtime.pytest_plugin" for e in entry_points(group="pytest11"))
    load = () if installed else ("-p", "fixer.runtime.pytest_plugin")  # an install registers it already
    return pytester.runpytest_inprocess(*load, "-rA", *args)


def test_failing_graph_bug_gets_the_diagnosis(pytester) -> None:
    result = run(pytester, "--graphfix-run")
    result.assert_outcomes(passed=2, failed=2)
    out = result.stdout.str()
    assert "graphfix run: the failure is an autograd graph bug:" in out
    assert "test_training.py:7:5: GF102" in out  # `hidden` built once, before the loop
    # not on the unrelated failure; its section runs to the next header (the short summary may
    # repeat the first failure's whole report: pytest does not shorten it when CI is set)
    unrelated = out.split("_ test_unrelated_failure _", 1)[1].split("\n==", 1)[0]
    assert "AssertionError" in unrelated and "graphfix run" not in unrelated


def test_strict_fails_a_passing_test_that_produced_a_finding(pytester) -> None:
    result = run(pytester, "--graphfix-run", "--graphfix-strict")
    result.assert_outcomes(passed=1, failed=3)
    assert "graphfix run (--graphfix-strict): the test passed, but its run produced:" in result.stdout.str()


def test_without_the_option_nothing_changes(pytester) -> None:
    result = run(pytester)
    result.assert_outcomes(passed=2, failed=2)
    # no diagnosis (a rule code) and no report section of the plugin; the header may list the
    # installed plugin and paths may hold the word (a checkout named graphfix)
    output = result.stdout.str()
    assert not re.search(r"\bGF\d{3}\b", output) and "graphfix run" not in output


def test_strict_alone_is_a_usage_error(pytester) -> None:
    result = run(pytester, "--graphfix-strict")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
