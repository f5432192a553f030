"""Unit tests of fixer/analysis/shared_graph.py: which backward calls walk the same graph."""

from __future__ import annotations

import ast
import textwrap

from fixer.analysis.calls import backward_calls, retains_graph
from fixer.analysis.scopes import scopes
from codemods.separate_backward_through_shared_graph import SeparateBackwardThroughSharedGraph
from fixer.analysis.shared_graph import later_backward_through_same_graph
from fixer.context import FileContext


PRELUDE = "import torch\nfrom torch import nn\n" + "".join(
    f"{name} = nn.{module}\n"
    for name, module in [("trunk", "Linear(2, 2)"), ("head_a", "Linear(2, 1)"), ("head_b", "Linear(2, 1)"), ("crit", "MSELoss()")]
)


def _later(source: str) -> list:
    """For each backward call of the module body: the line (counted in ``source``, first line 1)
    of the later call that walks its graph again, or None."""
    ctx = FileContext("t.py", PRELUDE + textwrap.dedent(source).lstrip("\n"))
    scope = scopes(ctx)[0]
    found = []
    for call in backward_calls(ctx, scope):
        later = later_backward_through_same_graph(ctx, scope, call)
        found.append(later.node.lineno - PRELUDE.count("\n") if later else None)
    return found


def test_two_heads_on_one_trunk_share():
    assert _later("""
        features = trunk(x)
        a = crit(head_a(features), y)
        b = crit(head_b(features), y)
        a.backward()
        b.backward()
    """) == [5, None]


def test_destructured_module_outputs_share():
    # sharing is proven by the forward: both outputs derive from one trunk evaluation
    assert _later("""
        class Net(nn.Module):
            def forward(self, x):
                h = trunk(x)
                return head_a(h), head_b(h)

        model = Net()
        logits, value = model(x)
        a = crit(logits, y)
        b = crit(value, y)
        a.backward()
        b.backward()
    """) == [11, None]


def test_detached_features_do_not_share():
    assert _later("""
        features = trunk(x)
        a = crit(head_a(features), y)
        b = crit(head_b(features.detach()), y)
        a.backward()
        b.backward()
    """) == [None, None]


def test_fresh_forward_does_not_share():
    assert _later("""
        a = crit(model(x), y)
        a.backward()
        b = crit(model(x), y)
        b.backward()
    """) == [None, None]


def test_same_tensor_again_is_always_reported():
    """Even a graph of additions (which saves nothing and could be walked twice): the question is
    whether a later call walks the graph, which is what retain_graph is for."""
    assert _later("""
        loss = crit(model(x), y)
        loss.backward()
        loss.backward()
    """) == [3, None]
    assert _later("""
        w = torch.ones(1, requires_grad=True)
        y = w + 1
        y.backward()
        y.backward()
    """) == [4, None]


def test_exclusive_branches_do_not_follow():
    assert _later("""
        loss = crit(model(x), y)
        if flag:
            loss.backward()
        else:
            loss.backward()
    """) == [None, None]


def test_helper_returning_loss_of_its_argument():
    assert _later("""
        def head_loss(head, features, y):
            return crit(head(features), y)

        features = trunk(x)
        a = head_loss(head_a, features, y)
        b = head_loss(head_b, features, y)
        a.backward()
        b.backward()
    """) == [8, None]


def test_extra_backward_after_accumulation_loop():
    assert _later("""
        for batch in range(2):
            loss = crit(model(batch), y)
            loss.backward()
        loss.backward()
    """) == [4, None]


def test_unresolvable_module_outputs_share_nothing():
    # `model` looks like a module by its name, but what its forward returns is unknown
    assert _later("""
        model = build(cfg)
        a_out, b_out = model(x)
        a = crit(a_out, y)
        b = crit(b_out, y)
        a.backward()
        b.backward()
    """) == [None, None]


def test_resolved_forward_with_independent_outputs_shares_only_the_same_element():
    source = """
        class Two(nn.Module):
            def forward(self, x):
                return head_a(x), head_b(x)

        model = nn.DataParallel(Two())
        a_out, b_out = model(x)
        a = crit(a_out, y)
        b = crit(b_out, y)
        c = crit(a_out * 2, y)
        a.backward()
        b.backward()
        c.backward()
    """
    assert _later(source) == [12, None, None]


def test_value_recorded_under_no_grad_is_a_boundary():
    assert _later("""
        features = trunk(x)
        a = crit(head_a(features), y)
        with torch.no_grad():
            stat = features.pow(2).mean()
        b = crit(head_b(x) * stat, y)
        a.backward()
        b.backward()
    """) == [None, None]


def _statements(source: str):
    from fixer.analysis.scopes import scopes

    ctx = FileContext("t.py", textwrap.dedent(source))
    marked = {}
    for node in ast.walk(ctx.tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name):
            marked[node.value.func.id] = node
    return ctx, scopes(ctx)[0], marked


def test_a_branch_that_ends_the_pass_does_not_run_before_what_follows():
    from fixer.analysis.shared_graph import runs_after_in_same_pass

    ctx, scope, s = _statements(
        """
        for i in range(4):
            if i < 2:
                first()
                continue
            if i < 3:
                also_first()
                log()
            second()
            for j in range(2):
                inner()
                continue
            after_inner()
        """
    )
    assert not runs_after_in_same_pass(ctx, scope, s["first"], s["second"])
    assert runs_after_in_same_pass(ctx, scope, s["also_first"], s["second"])
    assert runs_after_in_same_pass(ctx, scope, s["inner"], s["after_inner"], allow_first_loop=True)
    assert not runs_after_in_same_pass(ctx, scope, s["inner"], s["after_inner"])


def test_legacy_retain_variables_keeps_the_graph_like_retain_graph():
    # torch < 0.4 spelled retain_graph ``retain_variables``: the first call frees nothing, so the
    # second may walk the shared trunk again and GF105 has nothing to report
    source = PRELUDE + textwrap.dedent("""
        features = trunk(x)
        a = crit(head_a(features), y)
        b = crit(head_b(features), y)
        a.backward(retain_variables=True)
        b.backward()
    """)
    ctx = FileContext("t.py", source)
    assert [retains_graph(c) for c in backward_calls(ctx, scopes(ctx)[0])] == [True, False]
    assert list(SeparateBackwardThroughSharedGraph().check(ctx)) == []
    retaining = FileContext("t.py", source.replace("retain_variables=True", "retain_variables=False"))
    assert [d.code for d in SeparateBackwardThroughSharedGraph().check(retaining)] == ["GF105"]
