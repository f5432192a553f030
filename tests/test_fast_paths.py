"""The fast paths give the answers of the plain code they replace, on every fixture and example."""

from __future__ import annotations

import ast
import bisect
import collections
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fixer import context, engine, literals, suppress
from fixer.analysis import (
    assignments,
    class_model,
    gradient_consumers,
    imported_calls,
    imported_definitions,
    module_cache,
    names,
    project_files,
    project_text,
)
from fixer.analysis.scopes import (
    NESTED,
    _own_roots,
    scope_nodes,
    scopes,
    statement_index,
    walk_local,
)
from fixer.context import NOTHING, FileContext
from fixer.registry import all_rules
from fixer.nodes import child_nodes, walk
from fixer.rule import BACKWARD_CALL, has_backward_call
from fixer.source import LINE_BREAK, split_lines

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*ROOT.glob("fixtures/**/*.py"), *ROOT.glob("examples/*.py"), *ROOT.glob("fixer/**/*.py")])
SINGLETONS = (ast.expr_context, ast.operator, ast.boolop, ast.cmpop, ast.unaryop)


def _texts():
    for path in SOURCES:
        yield path, path.read_bytes()


def test_walk_yields_what_ast_walk_does_without_singletons():
    for path, data in _texts():
        tree = ast.parse(data)
        expected = [n for n in ast.walk(tree) if not isinstance(n, SINGLETONS)]
        got = list(walk(tree))
        assert len(got) == len(expected) and all(a is b for a, b in zip(got, expected)), path
        for node in expected[:200]:
            plain = [c for c in ast.iter_child_nodes(node) if not isinstance(c, SINGLETONS)]
            assert child_nodes(node) == plain, path


def test_import_lines_are_the_regex_matches():
    for path, data in _texts():
        expected = [m.span() for m in project_text.IMPORT_LINE.finditer(data)]
        assert [m.span() for m in project_text.import_lines(data)] == expected, path


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_split_lines_breaks_where_python_does(newline):
    samples = [p.read_text(encoding="utf-8").replace("\n", newline) for p in SOURCES[:50]]
    samples += ["a\x0cb\nc", "x\u2028y\r\nz", "é\x85\n", "", "no break", "\r\r\n\n"]
    for text in samples:
        plain, start = [], 0
        for match in LINE_BREAK.finditer(text):
            plain.append(text[start : match.end()])
            start = match.end()
        if start < len(text):
            plain.append(text[start:])
        assert split_lines(text) == plain


def test_backward_pre_filter_skips_only_comment_and_doctest_lines():
    assert has_backward_call(b"loss.backward()\n")
    assert has_backward_call(b'"""\nCall loss.backward() first.\n"""\n')  # prose: kept
    assert has_backward_call(b"# note\rloss.backward()\r")  # CR-only line breaks
    assert not has_backward_call(b"# loss.backward()\n")
    assert not has_backward_call(b'def f():\n    """\n    >>> out.backward()\n    ... y.backward()\n    """\n')
    assert not has_backward_call(b"# from torch.autograd import grad\n")
    for path, data in _texts():  # on code without such lines: the plain regex's answer
        if not re.search(rb"^[ \t]*(#|>>>|\.\.\.)[^\n]*(backward|grad)", data, re.MULTILINE):
            assert has_backward_call(data) == (BACKWARD_CALL.search(data) is not None), path


def test_lines_matching_with_a_leading_word_boundary():
    pattern = re.compile(r"\b(?:step|backward|zero_grad)\s*\(")
    for path, data in list(_texts())[:80]:
        text = data.decode("utf-8")
        ctx = FileContext(str(path), text, ast.parse(text))
        plain = sorted({bisect.bisect_right(ctx._line_starts, m.start()) for m in pattern.finditer(text)})
        assert ctx.lines_matching(pattern) == plain, path
        assert ctx.lines_matching(NOTHING) == []


WORD_PATTERNS = [
    r"set_grad_enabled|inference_mode|no_grad|enable_grad|requires_grad_?", r"\b(?:step|backward|zero_grad|self|x)\b", r"(?:a|ab|b)",
    r"\b(?:model|model_|été)", r"(?:loss|los)\b", r"\b(?:_|__init__|i)\b", r"a_?|self",
    r"\b(?:step|backward|zero_grad|train|x)\s*\(", r"(?:a|ab|los)\s*\(",
]


@pytest.mark.parametrize("pattern", WORD_PATTERNS)
def test_lines_matching_a_word_alternation_by_find(pattern):
    compiled = re.compile(pattern)
    assert context._word_alternation(compiled) is not None
    samples = [*list(_texts())[:150], ("words", "été1 été x_été\nab a\nloss los losses\n_ __init__ i\u00e9 ii self_\nmodel_x x.model\n"
                                                "ab (\n  a\n(x) los(ab\n(\nx(\n".encode())]
    for path, data in samples:
        text = data.decode("utf-8")
        ctx = FileContext(str(path), text, ast.parse(text) if path != "words" else ast.Module(body=[], type_ignores=[]))
        plain = sorted({bisect.bisect_right(ctx._line_starts, m.start()) for m in compiled.finditer(text)})
        assert ctx.lines_matching(compiled) == plain, (path, pattern)


@pytest.mark.parametrize("pattern", [r"\ba|b", r"\b(?:a|b)\s*\[", r"a|b\s*\(", r"\b(?:a_?)\s*\(", r"(?:a)|(?:b)", r"\b(?:a_?)\b", r"a.b", r"\.(?:a|b)"])
def test_other_patterns_are_searched_by_re(pattern):
    assert context._word_alternation(re.compile(pattern)) is None
    assert context._word_alternation(re.compile("a|b", re.IGNORECASE)) is None


def test_module_probes_agree_with_the_file_system(tmp_path):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    for name in ("pkg/__init__.py", "pkg/sub/__init__.py", "pkg/sub/steps.py", "pkg/models.py", "helpers.py"):
        (tmp_path / name).write_text("x = 1\n")
    (tmp_path / "pkg" / "data.py").mkdir()  # a folder named like a module is not one
    project_files.forget_project_files()
    folder = str(tmp_path / "pkg" / "sub")
    cases = [("steps", 0), ("models", 0), ("helpers", 0), ("pkg.models", 0), ("pkg.data", 0), ("data", 1), ("models", 2), (None, 1), ("nothing", 0)]
    for module, level in cases:
        parts = module.split(".") if module else []
        found = project_files.module_in_folder(folder, module, level)
        if found is not None:
            assert os.path.isfile(found) and found.endswith((os.path.join(*parts) + ".py") if parts else "__init__.py")
    assert project_files.module_in_folder(folder, "steps", 0) == os.path.join(folder, "steps.py")
    assert project_files.module_in_folder(folder, "pkg.data", 0) is None
    (tmp_path / "late.py").write_text("y = 2\n")  # a file added later is seen once caches are dropped
    project_files.forget_project_files()
    assert project_files.module_in_folder(folder, "late", 0) == str(tmp_path / "late.py")


def test_definitions_found_by_find_are_the_anchored_regex_matches():
    anchored = re.compile(rb"^([ \t]*)def (\w+)\b", re.MULTILINE)
    for path, data in _texts():
        found: dict[bytes, list[tuple[int, int]]] = {}
        for match in anchored.finditer(data):
            found.setdefault(match.group(2), []).append((len(match.group(1)), match.end()))
        for name in {*found, b"forward", b"nothing"}:
            assert list(module_cache._definitions(data, name)) == found.get(name, []), (path, name)
    assert list(module_cache._definitions(b"x = 1  # def forward\n\tdef forward_x():\n\tdef forward():", b"forward")) == [(1, 51)]


def test_definition_gate_lets_in_every_module_whose_tree_answers(tmp_path):
    """``may_define`` refuses a module only when the lookups that parse it would find nothing
    there: a top-level class (``_class_in``), function, or relative import of the name (the only
    re-export ``_definition_in`` follows)."""
    for path in SOURCES:
        text = path.read_text()
        tree = ast.parse(text)
        target = tmp_path / "module.py"
        target.write_text(text)
        project_files.forget_project_files()
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                assert project_text.may_define(str(target), node.name, ast.ClassDef, reexported=False), (path, node.name)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert project_text.may_define(str(target), node.name, ast.FunctionDef, reexported=False), (path, node.name)
            elif isinstance(node, ast.ImportFrom) and node.level:
                for alias in node.names:
                    assert project_text.may_define(str(target), alias.asname or alias.name, ast.ClassDef), (path, alias.name)
    target.write_text("from .models import (Net,\n    Head as Top)\nfrom torch import nn\nclass Local: pass\n")
    project_files.forget_project_files()
    assert [project_text.may_define(str(target), name, ast.ClassDef) for name in ("Net", "Top", "Local", "nn")] == [True, True, True, False]
    assert not project_text.may_define(str(target), "Net", ast.ClassDef, reexported=False)  # (never parsed for an import)
    project_files.forget_project_files()


def test_word_matches_are_those_of_a_leading_word_boundary():
    for path, data in list(_texts())[:150]:
        for name in (rb"self", rb"model", rb"step", rb"torch\.nn"):
            pattern = name + rb"\.(\w+)\s*\("
            plain = [m.span() for m in re.finditer(rb"\b" + pattern, data)]
            assert [m.span() for m in project_text.word_matches(pattern, data)] == plain, (path, name)


@pytest.mark.parametrize("text", ["x = 1\n", "# GraphFix: ignore\n", "# graphfix: ignore[GF301]\n", "é # GRAPHFIX: ignore\n", "é\n", "# graphfİx\n"])
def test_directive_needle_answers_as_the_case_insensitive_regex(text):
    assert suppress._may_hold_directive(text) == (suppress._NEEDLE.search(text) is not None)


def test_scope_nodes_are_the_local_walk_and_record_its_parent_links():
    for path, data in list(_texts())[:120]:
        text = data.decode("utf-8")
        fast, plain = FileContext(str(path), text, ast.parse(text)), FileContext(str(path), text, ast.parse(text))
        for one, other in zip(scopes(fast), scopes(plain)):
            expected = [n for n in walk_local(_own_roots(other), ctx=plain) if not isinstance(n, NESTED)]
            assert [ast.dump(n) for n in scope_nodes(one)] == [ast.dump(n) for n in expected], path
        assert sorted(map(_link, fast._parents.items())) == sorted(map(_link, plain._parents.items())), path


def _link(pair: tuple[ast.AST, ast.AST]) -> tuple:
    child, parent = pair
    return (type(child).__name__, getattr(child, "lineno", 0), getattr(child, "col_offset", 0), type(parent).__name__, getattr(parent, "lineno", 0))


def test_parent_links_are_the_trees():
    for path, data in list(_texts())[:120]:
        text = data.decode("utf-8")
        tree = ast.parse(text)
        plain = {id(child): node for node in walk(tree) for child in child_nodes(node)}
        asked = FileContext(str(path), text, tree)  # each node asked first, found around its statement
        assert all(asked.parent(child) is parent for child, parent in ((c, plain[id(c)]) for c in walk(tree) if c is not tree)), path
        whole = FileContext(str(path), text, tree).parents
        assert {id(c): p for c, p in whole.items()} == plain, path


@pytest.mark.parametrize("text", ["x = 1\n", "# First-Order MAML\nx = 1\n", "use_fomaml = True\n", "REPTILE = 1\n", "# ſirst order\n", "first = 2\n",
                                  "# first, in order\n", "FIRST_ORDER = True\n", "first\norder = 1\n", "x = 'firstorder'\n"])
def test_first_order_gate_answers_as_the_case_insensitive_regex(text):
    ctx = FileContext("m.py", text, ast.parse(text))
    assert gradient_consumers._may_say_first_order(ctx) or not gradient_consumers.FIRST_ORDER.search(text)
    if text.isascii():  # exact there: no regex over a text that cannot match
        assert gradient_consumers._may_say_first_order(ctx) == bool(gradient_consumers.FIRST_ORDER.search(text))
    assert gradient_consumers.wants_first_order(ctx, scopes(ctx)[0]) == bool(gradient_consumers.FIRST_ORDER.search(text))


def test_kept_texts_are_the_files_until_forgotten_and_never_while_recording(tmp_path):
    from fixer import depends

    path = tmp_path / "steps.py"
    path.write_bytes(b"a = 1\n")
    project_files.forget_project_files()
    assert project_files.read_file(str(path)) == b"a = 1\n"
    path.write_bytes(b"b = 22\n")
    with depends.collect() as found:  # a recorded read reads the file and records what it read
        assert project_files.read_file(str(path)) == b"b = 22\n"
    assert str(path) in found
    project_files.forget_project_files()
    assert project_files.read_file(str(path), 3) == b"b =" and project_files.read_file(str(path)) == b"b = 22\n"


MATCHING = b"""try:
    pass
except ValueError as err:
    f = lambda q, *r: q
match cmd:
    case [first, *rest]:
        pass
    case {"k": v, **others}:
        pass
    case Point(x=px) as point:
        pass
"""


def test_value_names_are_those_a_walk_finds():
    for path, data in [*_texts(), ("matching", MATCHING)]:
        text = data.decode("utf-8")
        tree = ast.parse(text)
        plain = {n.id for n in walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        plain |= {n.arg for n in walk(tree) if isinstance(n, ast.arg)}
        plain |= {n.name for n in walk(tree) if isinstance(n, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and n.name}
        plain |= {n.rest for n in walk(tree) if isinstance(n, ast.MatchMapping) and n.rest}
        assert names.value_names(FileContext(str(path), text, tree)) == plain, path


IMPORTS = """import models, pkg.sub as sub, os
from . import nets
from .layers import Block as B, Net
from models import Net, Other
from train.steps import step as run
import nets
"""


def test_import_indexes_answer_as_the_scan_of_the_imports(monkeypatch):
    monkeypatch.setattr(imported_definitions, "_definition_in", lambda path, module, level, name, kind: ("definition", module, level, name))
    monkeypatch.setattr(imported_definitions, "_class_in", lambda path, attr: ("class", path, attr))
    monkeypatch.setattr(imported_definitions, "module_file", lambda path, module, level: (module, level))
    ctx = FileContext("m.py", IMPORTS, ast.parse(IMPORTS))
    expected = {  # the first import that gives each spelling, as the plain scan of the imports finds it
        "models.Net": ("class", ("models", 0), "Net"), "models.Other": ("class", ("models", 0), "Other"), "B": ("definition", "layers", 1, "Block"),
        "Net": ("definition", "layers", 1, "Net"), "nets.Gen": ("class", ("nets", 1), "Gen"),
        "models.Deep": ("class", ("models", 0), "Deep"), "pkg.sub.Net": ("class", ("pkg.sub", 0), "Net"),
        "sub.Net": None, "Other": None, "os": None,
    }
    for name, answer in expected.items():
        assert imported_definitions._imported_class(ctx, name) == answer, name
    bindings = {"run": ("train.steps", 0, "step"), "sub.f": ("pkg.sub", 0, "f"), "models.f": ("models", 0, "f"), "models.a.b": None, "B": ("layers", 1, "Block"), "nets": ("", 1, "nets")}
    for spelled, answer in bindings.items():
        func = ast.parse(spelled, mode="eval").body
        got = imported_definitions._imported_binding(ctx, func)
        assert got == (tuple(None if v == "" else v for v in answer) if answer else None), spelled


def test_class_mentions_count_code_not_prose():
    """A class named in a docstring or a comment is not used otherwise; named in code, or as a
    string equal to its name (``__all__``, ``getattr``), it is."""
    text = ('"""Net trains; see Net for details."""\n\n\nclass Net:\n    pass\n\n\n'
            'net = Net()  # a Net\nother = Net()\n')
    ctx = FileContext("m.py", text, ast.parse(text))
    assert class_model._mentions(ctx) == {"Net": 3}
    assert class_model.constructions(ctx, statement_index(ctx).classes[0]) is not None
    for used in ("names = ['Net']\n", "factory = Net\n", "class Sub(Net):\n    pass\n", "print(Net.__name__)\n"):
        changed = text + used
        ctx = FileContext("m.py", changed, ast.parse(changed))
        assert class_model.constructions(ctx, statement_index(ctx).classes[0]) is None, used


@pytest.mark.parametrize("name", [b"step", b"x", b"_", b"Net", b"train_step", "été".encode()])
def test_whole_word_search_finds_what_a_bounded_regex_finds(name):
    for path, data in [*list(_texts())[:150], ("words", "xstep step_ é_Net été1 été".encode() + b" x\n")]:
        plain = re.search(rb"(?<![A-Za-z0-9_])" + re.escape(name) + rb"(?![A-Za-z0-9_])", data) is not None
        assert imported_calls.names_word(data, name) == plain, (path, name)


def test_an_unpacked_element_has_no_parent_without_mapping_the_file():
    text = "import torch\n\n\ndef step(model, x):\n    with torch.no_grad():\n        out, hidden = model(x)\n    return out\n"
    ctx = FileContext("m.py", text, ast.parse(text))
    function = scopes(ctx)[1]
    (_, part), = assignments.scope_assignments(ctx, function).assignments["out"]
    assert isinstance(part, ast.Subscript) and part.value is ctx.tree.body[1].body[0].body[0].value
    assert ctx.parent(part) is None and not ctx._all_parents
    assert ctx.parent(part.value) is ctx.tree.body[1].body[0].body[0]  # the call itself is the tree's


def _fixture_scopes():
    for path in sorted(ROOT.glob("fixtures/**/*.py")):
        text = path.read_text(encoding="utf-8")
        ctx = FileContext(str(path), text, ast.parse(text))
        for scope in scopes(ctx):
            yield path, ctx, scope


def test_accumulations_are_found_among_the_statements_picked():
    from fixer.analysis.accumulations import ACCUMULATING, accumulation
    from fixer.analysis.scopes import nodes_of

    for path, ctx, scope in _fixture_scopes():
        picked = nodes_of(scope, ACCUMULATING)
        assert picked == [n for n in scope_nodes(scope) if isinstance(n, tuple(ACCUMULATING))], path
        assert all(accumulation(n) is None for n in scope_nodes(scope) if n not in picked), path


def test_element_stores_made_lazily_are_the_eager_scans():
    from fixer.analysis import element_stores as es

    def eager(ctx, method):  # the scan before its parts were made on first need
        me = method.self_name
        if not me:
            return []
        params = {a.arg for a in method.node.args.posonlyargs + method.node.args.args + method.node.args.kwonlyargs} - {me}
        bound = es._bound_names(method)
        element_names, previous, found = es._element_names(method, params, bound), es._previous_reads(method, bound), []
        for node in scope_nodes(method):
            added, own_reads = es._addition(node, me), ()
            if added is None:
                added, own_reads = es._recurrence(ctx, node, me, previous, bound)
            if added is None:
                continue
            elements = [e for e in es.flowing_nodes(ctx, added[1]) if es._element_of(e, element_names, params, bound)]
            elements = tuple(e for e in elements if not any(a in elements for a in ctx.ancestors(e)))
            parameters = {es._element_of(e, element_names, params, bound)[0] for e in elements}
            if elements and len(parameters) == 1:
                iterated = any(es._element_of(e, element_names, params, bound)[1] for e in elements)
                found.append(es.ElementStore(node, added[0], parameters.pop(), elements, iterated, own_reads))
        return found

    seen = 0
    for path, ctx, scope in _fixture_scopes():
        expected = eager(ctx, scope)
        assert es.element_stores(ctx, scope) == expected, path
        seen += bool(expected)
    assert seen >= 3  # fixtures that keep elements: the comparison saw stores


def test_statements_picked_through_statement_lists_are_those_of_the_scope_walk():
    from fixer.analysis.scopes import STATEMENTS, nodes_of, scope_statements

    kinds = frozenset({ast.Assign, ast.AugAssign, ast.Expr, ast.Delete, ast.Return})
    for path, data in [*list(_texts())[:100], ("matching", MATCHING)]:
        text = data.decode("utf-8")
        tree = ast.parse(text)  # one tree, two contexts: the statement walk records its own links
        walked, listed = FileContext(str(path), text, tree), FileContext(str(path), text, tree)
        plain = {id(c): p for p in walk(listed.tree) for c in child_nodes(p)}
        for one, other in zip(scopes(walked), scopes(listed)):
            expected = [n for n in scope_nodes(one) if isinstance(n, ast.stmt)]
            assert list(map(id, scope_statements(other))) == list(map(id, expected)), path
            assert list(map(id, nodes_of(other, kinds))) == [id(n) for n in expected if type(n) in kinds], path
            assert all(listed.parent_links[n] is plain[id(n)] for n in scope_statements(other)), path  # recorded by the walk
    assert ast.Try in STATEMENTS and ast.ExceptHandler not in STATEMENTS


def test_subtree_holds_what_walk_yields():
    from fixer.nodes import subtree

    for path, data in list(_texts())[:100]:
        tree = ast.parse(data)
        for node in [tree, *tree.body[:20]]:
            got = subtree(node)
            assert len(got) == len({id(n) for n in got}) and {id(n) for n in got} == {id(n) for n in walk(node)}, path


def test_statement_index_skips_only_statements_that_hold_none():
    for path, data in [*list(_texts())[:300], ("matching", MATCHING)]:
        text = data.decode("utf-8")
        ctx = FileContext(str(path), text, ast.parse(text))
        index, every = statement_index(ctx), list(walk(ctx.tree))
        assert {id(n) for n in index.assigns} == {id(n) for n in every if isinstance(n, ast.Assign)}, path
        assert {id(n) for n in index.imports} == {id(n) for n in every if isinstance(n, (ast.Import, ast.ImportFrom))}, path
        assert {id(n) for n in index.classes} == {id(n) for n in every if isinstance(n, ast.ClassDef)}, path
        assert {id(s.node) for s in index.scopes} == {id(n) for n in every if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef))}, path


def test_helper_call_gate_answers_as_the_regex():
    from fixer.analysis import gan_events
    from fixer.analysis.gan_steps import text_of

    seen = 0
    for path in sorted(ROOT.glob("fixtures/*discriminator*/*.py")) + sorted(ROOT.glob("fixtures/*fake*/*.py")):
        text = path.read_text(encoding="utf-8")
        ctx = FileContext(str(path), text, ast.parse(text))
        names = gan_events._backward_helper_names(ctx)
        if not names:
            continue
        pattern = re.compile(r"(?:(?<![.\w])|\bself\.)(?:%s)\s*\(" % "|".join(map(re.escape, sorted(names))))
        for scope in scopes(ctx):
            if isinstance(scope.node, ast.Module):
                plain = any(pattern.search(text_of(ctx, n)) for n in scope.node.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))
            else:
                plain = pattern.search(text_of(ctx, scope.node)) is not None
            assert gan_events._mentions_call(ctx, scope, names) == plain, path
            seen += plain
    assert seen >= 5


def test_field_additions_and_recurrences_dump_only_what_can_match():
    from fixer.analysis import element_stores as es
    from fixer.analysis.accumulations import accumulation

    text = ("class M:\n    def f(self, x, d):\n        self.t = self.t + x\n        y = self.t + x\n        self.e[0] = 0.9 * self.e[0] + x\n"
            "        self.u = self.u.v + x\n        z = z + x\n        d['k'] = d['k'] + x\n        self.w = g(self.w, x)\n")
    ctx = FileContext("m.py", text, ast.parse(text))
    method = scopes(ctx)[1]
    stmts = method.node.body
    assert [es._addition(s, "self") is not None for s in stmts] == [True, False, False, False, False, False, False]
    bound = es._bound_names(method)
    assert [bool(es._recurrence(ctx, s, "self", {}, bound)[0]) for s in stmts] == [True, False, True, False, False, False, True]
    assert [a[1] if (a := accumulation(s)) else None for s in stmts] == ["self.t", None, "self.e", None, "z", "d", None]  # (main's answers)


def test_call_questions_answer_none_off_the_calls_picked():
    from fixer.analysis.calls import backward_call, optimizer_call
    from fixer.analysis.protocol import BLOCK_FIELDS, blocks
    from fixer.analysis.scopes import CALLS, nodes_of

    for path, ctx, scope in _fixture_scopes():
        calls = {id(n) for n in nodes_of(scope, CALLS)}
        others = [n for n in scope_nodes(scope) if id(n) not in calls]
        assert all(backward_call(ctx, n) is None and optimizer_call(ctx, n) is None for n in others), path
        plain = [scope.body] + [b for n in scope_nodes(scope) if isinstance(n, ast.stmt) for b in
                                [*(getattr(n, f, None) for f in BLOCK_FIELDS), *(h.body for h in getattr(n, "handlers", None) or ())] if b]
        assert [id(b) for b in blocks(scope)] == [id(b) for b in plain], path


def test_declarations_and_escaping_names_from_the_nodes_picked():
    from fixer.analysis import accumulations as acc

    seen = 0
    for path, ctx, scope in _fixture_scopes():
        declared = {n for node in scope_nodes(scope) if isinstance(node, (ast.Nonlocal, ast.Global)) for n in node.names}
        assert all(acc._declared_outside(scope, n) == (n in declared) for n in [*declared, "total", "loss"]), path
        plain: set[str] = set()
        for node in scope_nodes(scope):
            if isinstance(node, ast.Return) and node.value is not None:
                plain |= {d for n in walk(node.value) if (d := names.dotted(n))}
            if isinstance(node, ast.Assign) and any(not isinstance(t, ast.Name) for t in node.targets):
                plain |= {d for n in walk(node.value) if (d := names.dotted(n))}
            if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in acc.TERMINAL_CALLS):
                if getattr(node.func, "attr", None) not in acc.TERMINAL_METHODS:
                    plain.update(d for a in node.args if (d := names.dotted(a)))
        assert acc._escaping_names(scope) == plain, path
        seen += bool(declared)
    assert seen >= 1


def test_rebound_and_global_names_answer_as_the_walks():
    from fixer.analysis import field_constants as fc

    text = "g = 1\nglobal_x = 2\ndef f(a):\n    global h\n    h = g\n    def inner():\n        x = 1\n    del y\n    return a\nclass C:\n    def m(self):\n        z: int = 3\n"
    for path, data in [("text", text.encode()), *list(_texts())[:12]]:
        source = data.decode("utf-8")
        ctx = FileContext(str(path), source, ast.parse(source))
        words = sorted(set(re.findall(r"[A-Za-z_]\w*", source)))[:60] + ["g", "h", "x", "y", "z", "nothing"]
        for name in words:
            assert fc._rebound(ctx, name) == any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load) for n in ast.walk(ctx.tree))
        for scope in scopes(ctx)[1:6]:
            args = scope.node.args
            params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg] if a is not None}
            for name in words:
                bound = any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load) for n in ast.walk(scope.node))
                declared = any(isinstance(n, ast.Global) and name in n.names for n in ast.walk(ctx.tree))
                assert fc._global(ctx, scope, name) == (name not in params and not bound and not declared), (path, name)


def test_returns_and_loops_picked_from_the_statements():
    from fixer.analysis.scopes import LOOP_STATEMENTS, RETURNS, nodes_of

    for path, ctx, scope in _fixture_scopes():
        assert nodes_of(scope, RETURNS) == [n for n in scope_nodes(scope) if isinstance(n, ast.Return)], path
        assert nodes_of(scope, LOOP_STATEMENTS) == [n for n in scope_nodes(scope) if isinstance(n, (ast.For, ast.AsyncFor, ast.While))], path


def test_bindings_are_read_only_from_the_binding_nodes():
    from fixer.analysis.assignments import BINDINGS, Assignments
    from fixer.analysis.graph_reuse import assigned_names
    from fixer.analysis.scopes import nodes_of

    for path, ctx, scope in _fixture_scopes():
        assert all(not assigned_names(n) for n in scope_nodes(scope) if type(n) not in BINDINGS), path
        assert nodes_of(scope, BINDINGS) == [n for n in scope_nodes(scope) if type(n) in BINDINGS], path
        names = {d for n in scope_nodes(scope) for d in assigned_names(n)}
        assert names <= set(Assignments(ctx, scope).assignments) | {None}, path


def test_frozen_exit_keeps_the_output():
    """``python -m fixer`` freezes the collector as the process ends (launch.main): its output and
    exit status are those of the command line run without the freeze."""
    folder = str(ROOT / "fixtures" / "loss_accumulated_with_graph")
    args = ["--no-cache", "--jobs", "1", "--output-format", "json", folder]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    frozen = subprocess.run([sys.executable, "-m", "fixer", *args], check=False, capture_output=True, text=True, env=env)
    plain = subprocess.run([sys.executable, "-c", "import sys; from fixer.cli import main; main(sys.argv[1:])", *args],
                           check=False, capture_output=True, text=True, env=env)
    assert frozen.returncode == plain.returncode == 1
    assert frozen.stdout == plain.stdout and json.loads(frozen.stdout)


TOKEN_CASES = [
    '"""loss.backward() in a docstring"""\nx = 1\n', 's = ("a.backward("\n     "b")\n', 's = ("a"  # c\n     "x.backward(")\n',
    's = "a.backward(" "b"\n', 's = "x.backward(" f"{y}"\n', 's = f"{x}.backward("\n', 'print(Fr"{a}.backward(")\n',
    's = r"\\".backward("\n', 'def g():\n    return"x.backward("\n', 'if"autograd.grad" in s: pass\n',
    "s = '''it's .backward( here'''\n", 's = "#" ; t = "y.backward("\n', 's = "abc\\\nx.backward("\n',
    'x = 1  # "loss.backward()\ns = "z.backward("\n', 'import os  # grad\ns = "import grad"\n', 's = "import"; grad = 1\n',
    'x = "a"\n"loss.backward()"\n', 'rb"x.backward(" ; Rb"y"\n', 'y = br"\\\\" + "m.backward("\n', 'loss.backward()  # "x"\n',
    'é = 1\n"""Größe: loss.backward()"""\n', 's = "ü" ; t = "y.backward("  # ñ\n',
]


def test_string_tokens_blank_what_the_tree_blanks():
    """``blanked_by_tokens`` answers, where it answers, the bytes ``blanked_literals`` makes from
    the tree; it answers for docstrings and plain literals (the files it spares a parse)."""
    answered = 0
    for text in [*TOKEN_CASES, *(path.read_text() for path in SOURCES)]:
        early = literals.blanked_by_tokens(text)
        if early is not None:
            answered += 1
            assert early == literals.blanked_literals(text, ast.parse(text)), text[:200]
    assert answered >= 15
    assert literals.blanked_by_tokens(TOKEN_CASES[0]) == b" " * 36 + b"\nx = 1\n"
    assert [literals.blanked_by_tokens(TOKEN_CASES[i]) for i in (1, 4, 5, 15)] == [None] * 4  # the tree decides
    assert literals.blanked_by_tokens(TOKEN_CASES[-2]) == "é = 1\n".encode() + b" " * 30 + b"\n"  # (UTF-8 bytes)


def test_a_file_with_backward_text_in_literals_only_gives_the_parsed_result(tmp_path, monkeypatch):
    """Spared the parse, such a file's result is the one the tree's second look gives."""
    text = 'def f(x):\n    """Call loss.backward() after this."""\n    return x\n'
    options = engine.Options(rules=tuple(all_rules()))
    parsed = engine._process_python(str(tmp_path / "m.py"), text.encode(), options)
    assert engine.active_rules(text.encode(), options.rules) and engine.run_rules("m.py", text, options.rules, "\n", False) == ([], [])
    monkeypatch.setattr(engine, "parse", None)  # (never called)
    spared = engine._process_python(str(tmp_path / "m.py"), text.encode(), options)
    assert (spared.parsed, spared.diagnostics, spared.errors) == (parsed.parsed, parsed.diagnostics, parsed.errors) == (True, [], [])
