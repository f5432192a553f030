"""GF302 needless-retain-graph: the keyword edit, silence on patterns that need the graph, and an
execution check the shared harness cannot make: ``retained_nodes`` counts autograd nodes, which
``retain_graph`` does not change; what it keeps alive are the nodes' *saved tensors*."""

from __future__ import annotations

import textwrap
import weakref
from pathlib import Path

import pytest

from fixer.engine import Options, process_source
from tests.fixture_cases import discover
from tests.helpers import rule_for_module

RULE = rule_for_module("needless_retain_graph")


def fix(source: str) -> tuple[str, int]:
    result = process_source("t.py", textwrap.dedent(source).encode(), Options(rules=(RULE,), fix=True, unsafe=True))
    return (result.fixed if result.changed else textwrap.dedent(source)), len(result.diagnostics)


LOOP = """\
import torch
model = torch.nn.Linear(2, 1)
for x in [torch.randn(3, 2)]:
    loss = model(x).pow(2).sum()
    {call}
"""


@pytest.mark.parametrize(
    "call, fixed",
    [
        ("loss.backward(retain_graph=True)", "loss.backward()"),
        ("loss.backward(\n        retain_graph=True,\n    )", "loss.backward()"),
        ("loss.backward(None, retain_graph=True)", "loss.backward(None)"),
        ("loss.backward(None, retain_graph=True,)", "loss.backward(None,)"),
        ("loss.backward(retain_graph=True, inputs=[model.weight])", "loss.backward(inputs=[model.weight])"),
        ("loss.backward(\n        None,\n        retain_graph=True,\n    )", "loss.backward(\n        None,\n    )"),
        ("loss.backward(\n        None,  # gradient\n        retain_graph=True)", "loss.backward(\n        None  # gradient\n        )"),
        ("loss.backward(\n        retain_graph=True,  # why\n        inputs=None)", "loss.backward(\n          # why\n        inputs=None)"),
    ],
)
def test_keyword_removal_keeps_layout_and_comments(call: str, fixed: str) -> None:
    out, count = fix(LOOP.format(call=call))
    assert count == 1
    assert out == LOOP.format(call=fixed)


SILENT = {
    "band_aid_for_carried_hidden": """\
        import torch
        rnn = torch.nn.RNNCell(2, 3)
        hidden = torch.zeros(1, 3)
        for x in torch.randn(4, 1, 2):
            hidden = rnn(x, hidden)
            loss = hidden.pow(2).sum()
            loss.backward(retain_graph=True)
        """,
    "carried_container": """\
        import torch
        net = torch.nn.Linear(2, 2)
        cache = []
        for x in torch.randn(3, 1, 2):
            cache.append(net(x))
            loss = torch.stack(cache).sum()
            loss.backward(retain_graph=True)
        """,
    "losses_of_shared_trunk_in_a_loop": """\
        import torch
        trunk, heads = torch.nn.Linear(2, 2), [torch.nn.Linear(2, 1) for _ in range(2)]
        features = trunk(torch.randn(3, 2))
        losses = [head(features).sum() for head in heads]
        for loss in losses:
            loss.backward(retain_graph=True)
        """,
    "graph_rebuilt_only_sometimes": """\
        import torch
        encoder, head = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)
        for step in range(4):
            if step % 2 == 0:
                features = encoder(torch.randn(3, 2))
            loss = head(features).pow(2).sum()
            loss.backward(retain_graph=True)
        """,
    "appended_to_attribute": """\
        import torch
        class Step:
            def __init__(self):
                self.model, self.history = torch.nn.Linear(2, 1), []
            def run(self, batch):
                loss = self.model(batch).pow(2).sum()
                loss.backward(retain_graph=True)
                self.history.append(loss)
        """,
    "passed_to_unknown_function_after": """\
        import torch
        model = torch.nn.Linear(2, 1)
        def second_pass(loss):
            (2 * loss).backward()
        loss = model(torch.randn(3, 2)).pow(2).sum()
        loss.backward(retain_graph=True)
        second_pass(loss)
        """,
    "feature_map_parameter": """\
        import torch
        head = torch.nn.Linear(2, 1)
        def head_step(features):
            loss = head(features).pow(2).sum()
            loss.backward(retain_graph=True)
        """,
    "kwargs_may_hold_create_graph": """\
        import torch
        model = torch.nn.Linear(2, 1)
        options = {"create_graph": True}
        loss = model(torch.randn(3, 2)).pow(2).sum()
        loss.backward(retain_graph=True, **options)
        """,
}


@pytest.mark.parametrize("name", sorted(SILENT))
def test_silent_where_the_graph_may_be_walked_again(name: str) -> None:
    assert fix(SILENT[name])[1] == 0


# --- execution: after each backward call, before keeps more saved tensors alive than after ------

torch = pytest.importorskip("torch")
CASES = [c for c in discover() if c.rule_module == "needless_retain_graph" and c.before]


class _Saved:
    __slots__ = ("tensor", "__weakref__")


def saved_alive_after_backward(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Run the program; after every backward/grad call, how many saved tensors are still held."""
    alive: "weakref.WeakSet[_Saved]" = weakref.WeakSet()
    counts: list[int] = []

    def pack(tensor):
        holder = _Saved()
        holder.tensor = tensor
        alive.add(holder)
        return holder

    def counting(original):
        def call(*args, **kwargs):
            result = original(*args, **kwargs)
            counts.append(len(alive))
            return result

        return call

    with monkeypatch.context() as patch:
        patch.syspath_prepend(str(path.parent))  # a fixture's support package beside it (runconf/)
        patch.setattr(torch.autograd, "backward", counting(torch.autograd.backward))
        patch.setattr(torch.autograd, "grad", counting(torch.autograd.grad))
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda holder: holder.tensor):
            torch.manual_seed(0)
            exec(compile(path.read_text(), str(path), "exec"), {"__name__": "__main__", "__file__": str(path)})
    return counts


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fix_frees_saved_tensors_and_keeps_numbers(case, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.execution import compare_states, run_program

    before, after = saved_alive_after_backward(case.before, monkeypatch), saved_alive_after_backward(case.after, monkeypatch)
    assert len(before) == len(after) and sum(before) > sum(after), (before, after)
    assert compare_states(run_program(case.before).state, run_program(case.after).state) is None
