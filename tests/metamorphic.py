"""Metamorphic checks (issue 8): findings must not depend on what the code does not say.

Every fixture (before and ok) is transformed in ways that keep what it does to autograd graphs and
gradients; its findings (line, code) must stay the same, line-shifted where lines were added:

- rename: every local name (assigned, a parameter, a def or class; not attributes, keyword
  names, imports or external API names) renamed consistently four ways: upper case, capitalised
  (``G_loss``), a long prefix and suffix, short opaque names (n0, n1, ...); inside f-strings too.
- opaque: each data producer (``torch.randn(...)``, ``torch.zeros(...)`` without
  ``requires_grad``, ...) replaced by a call graphfix cannot see into: a function imported from
  another package, a method of an imported object, or the legacy ``Variable(torch.Tensor(...))``.
  A new finding is always a mismatch; a lost finding is right only when the producer was the
  bug's evidence: those read and judged so are listed in REVIEWED_LOST.
- added: a statement that touches nothing (``print(...)``, ``tick_0 = 0`` and ``step_count_0 += 1``
  on fresh names, a logging call) inserted before every statement of every loop and function
  body and at their ends.

Shared by tests/test_metamorphic.py (a sample) and benchmarks/metamorphic.py (every fixture)."""

from __future__ import annotations

import ast
import collections
import builtins
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

from fixer.engine import Options, process_source
from tests.fixture_cases import Case
from tests.helpers import rule_for_module, strip_markers

# Names that are another library's contract, not a local choice: PyTorch Lightning's base class
# (the fixtures define a stand-in for it so that they run with torch only).
EXTERNAL_API = {"LightningModule"}
KEEP = set(dir(builtins)) | {"self", "cls", "forward", "__init__", "__name__"} | EXTERNAL_API

Findings = list[tuple[int, str]]


@dataclass(frozen=True)
class Variant:
    transformation: str  # "rename", "opaque", "added"
    label: str  # "upper", "imported", "print", ...
    source: str
    inserted: tuple[int, ...] = ()  # original line numbers before which one line was inserted

    def shifted(self, found: Findings) -> Findings:
        return sorted((line + sum(1 for at in self.inserted if at <= line), code) for line, code in found)


# --- rename -----------------------------------------------------------------------------------
def local_names(tree: ast.AST) -> set[str]:
    names, fixed = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.keyword) and node.arg:
            fixed.add(node.arg)  # f(lr=...) may be another library's parameter
        elif isinstance(node, ast.Attribute):
            fixed.add(node.attr)
        if isinstance(node, ast.ClassDef):  # methods may be framework hooks (training_step)
            fixed.update(item.name for item in node.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            fixed.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names - fixed - KEEP


def rename(source: str, how: Optional[Callable[[str], str]]) -> str:
    names = local_names(ast.parse(source))
    order = {name: index for index, name in enumerate(sorted(names))}
    new_name = how or (lambda name: f"n{order[name]}")
    mapping = {name: new_name(name) for name in names}
    taken = collections.Counter(mapping.values())
    # one-to-one, as a rename must be: ``trainer = Trainer()`` upper-cased would bind the class's name
    mapping = {name: new if taken[new] == 1 else f"{new}{order[name]}" for name, new in mapping.items()}
    tokens, previous = [], None
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.NAME and token.string in names and not (previous and previous.string == "."):
            token = token._replace(string=mapping[token.string])
        elif token.type == tokenize.STRING and F_STRING.match(token.string) and "\n" not in token.string:
            token = token._replace(string=_renamed_fields(token.string, mapping))
        tokens.append(token)
        if token.type not in (tokenize.NL, tokenize.COMMENT):
            previous = token
    return tokenize.untokenize(tokens)


F_STRING = re.compile(r"[rRbBuU]?[fF][rR]?['\"]")  # one STRING token before Python 3.12 (its fields are names there after)
FIELD_NAME = re.compile(r"(?<![.\w])[A-Za-z_]\w*")


def _renamed_fields(text: str, mapping: dict[str, str]) -> str:
    """The f-string ``text`` with the names in its replacement fields renamed (not the literal text,
    not strings or attributes inside a field, not a format spec after a top-level ``:`` or ``!``)."""
    out, i, depth, code = [], 0, 0, []

    def flush() -> None:
        out.append(FIELD_NAME.sub(lambda m: mapping.get(m.group(), m.group()), "".join(code)))
        code.clear()

    while i < len(text):
        char = text[i]
        if depth == 0:
            if text.startswith("{{", i):
                out.append("{{")
                i += 2
                continue
            out.append(char)
            depth += char == "{"
        elif char in "'\"" and text[i] != text[_quote_index(text)]:
            end = text.index(char, i + 1)  # a string inside a field: kept as it is
            flush()
            out.append(text[i : end + 1])
            i = end
        elif char in "{[(":
            code.append(char)
            depth += 1
        elif char in "}])" and depth > 1:
            code.append(char)
            depth -= 1
        elif char == "}" or depth == 1 and char in ":!" and not text.startswith("!=", i):
            flush()
            if char != "}":  # a format spec or conversion runs to the field's end, unrenamed
                end = text.index("}", i)
                out.append(text[i:end])
                i = end
                char = "}"
            out.append(char)
            depth = 0
        else:
            code.append(char)
        i += 1
    flush()
    return "".join(out)


def _quote_index(text: str) -> int:
    return next(i for i, c in enumerate(text) if c in "'\"")


RENAMINGS: dict[str, Optional[Callable[[str], str]]] = {
    "upper": lambda name: name.upper() + "_",
    "capitalised": lambda name: name[:1].upper() + name[1:] + "_",  # G_loss, Errd_: a value spelled as classes are
    "long": lambda name: f"renamed_{name}_value",
    "opaque": None,
}


def renamed(source: str) -> Iterator[Variant]:
    for label, how in RENAMINGS.items():
        yield Variant("rename", label, rename(source, how))


# --- opaque producers -------------------------------------------------------------------------
PRODUCERS = re.compile(r"^(torch\.)?(randn|rand|randint|zeros|ones|empty|full|tensor|arange|linspace)$")
OPAQUE = {  # label -> (import line, text before the producer's arguments, text after them)
    "imported": ("from datapkg import make_batch", "make_batch(", ")"),
    "method": ("from datapkg import replay_buffer", "replay_buffer.sample(", ")"),
    "legacy": ("from torch.autograd import Variable", "Variable(torch.Tensor(", "))"),
}


def _producers(tree: ast.AST) -> list[ast.Call]:
    """Data producer calls: no ``requires_grad``."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or any(k.arg == "requires_grad" for k in node.keywords):
            continue
        name = ast.unparse(node.func)
        if PRODUCERS.match(name) and (name.startswith("torch.") or name in _torch_imports(tree)):
            found.append(node)
    return found


def _torch_imports(tree: ast.AST) -> set[str]:
    return {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "torch"
        for alias in node.names
    }


def _first_import_line(tree: ast.Module) -> int:
    """The line before which an import can go: after the docstring and ``from __future__``."""
    body = list(tree.body)
    while body and (
        isinstance(body[0], ast.ImportFrom) and body[0].module == "__future__"
        or isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)
    ):
        body.pop(0)
    return body[0].lineno if body else (tree.body[-1].end_lineno + 1 if tree.body else 1)


# Findings lost under opaque producers, each read and judged right. GF302 proves a retain_graph
# needless only when nothing else can walk the graph; data made by torch was that proof, and a value
# from a call graphfix cannot see into may carry a graph that a later backward walks again.
REVIEWED_LOST = frozenset(
    f"needless_retain_graph/{name}"
    for name in (
        "actor_critic_detached_advantage",  # learn(x, target): target may be a caller's graph
        "agent_update_from_states",  # update(states, actions, returns) from unknown values
        "autograd_grad_once",  # x, y made before the loop: x @ w every pass
        "batches_given_at_construction",  # Trainer(layer, pool) with pool from an unknown call
        "cycle_pass_on_detached_copy",  # x in both losses of a step
        "dqn_learn_from_transitions",  # learn(*sample(6)) from unknown values (no longer data by their names)
        "gan_detached_fake",  # real and the labels in both losses
        "inside_method",  # train_step(batch) given a batch from an unknown call (no longer data by its name)
        "keyword_among_arguments",  # model(x) in both backward calls
        "model_class_critic_step_first",  # set_batch(gray) from an unknown call: gray may hold a graph both losses walk
        "module_constant_flag",  # fit_step(net, opt, x, y) from unknown values: x may be a graph a later backward walks
        "config_class_attribute_flag",  # train(model, batches, ...) given batches from unknown calls: the same
        "config_dataclass_flag",  # fitter.fit(inputs, targets) from unknown calls: the same
        "constructor_argument_flag",  # learner.step(x, y) from unknown calls: the same
        "imported_config_flag",  # task.run(x, y) from unknown calls: the same
        "model_class_generator_step_first",  # feed(source, target) from unknown calls: the same
        "trainer_keeps_last_loss",  # fit_batch(inputs, targets) from unknown calls (no longer data by their names)
        "trainer_step_with_imported_objective",  # trainer.step(x, y) given values from unknown calls: the same
    )
) | {
    # GF101 writes into a buffer known to be a tensor (``bank = torch.zeros(...)``); from an unseen
    # call it may be an array or a list: unknown
    "graph_carried_across_iterations/tensor_memory_bank",
    # GF111 needs the field to be a tensor (``self.total = torch.zeros(...)``); from an unseen call
    # it may be a list or an array, whose item writes record nothing: unknown
    "graph_written_into_persistent_tensor/accumulator_in_helper_method",
    "graph_written_into_persistent_tensor/centroid_tracker_plain_object",
    # GF102 needs the index to be a tensor (``X = torch.randint(...)`` then ``C[X]``: advanced indexing
    # saves it); from an unseen call it may be an integer or a slice, which saves nothing: unknown
    "subgraph_built_before_loop/lookup_table_indexed_before_loop",
    # GF112 needs the memo to be computed from the parameters alone; the grid from an unseen call
    # (``torch.arange(n)`` made opaque) may carry a caller's graph, which would make it state, not a memo
    "graph_memoized_from_parameters/learned_position_scale_memo",
    "graph_memoized_from_parameters/oscillator_basis_in_helper",
}


def opaque(source: str) -> Iterator[Variant]:
    tree = ast.parse(source)
    calls = _producers(tree)
    if not calls:
        return
    data = source.encode("utf-8")  # ast columns count UTF-8 bytes
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    at = lambda line, col: starts[line - 1] + col  # noqa: E731
    for label, (import_line, opening, closing) in OPAQUE.items():
        edits = []  # (start, end, text): the function and its "(" become ``opening``; ``closing`` ends the call
        for call in calls:
            end = at(call.end_lineno, call.end_col_offset)
            edits.append((at(call.func.lineno, call.func.col_offset), data.index(b"(", at(call.func.end_lineno, call.func.end_col_offset)) + 1, opening))
            edits.append((end - 1, end, closing))
        edited = data
        for start, end, text in sorted(edits, reverse=True):
            edited = edited[:start] + text.encode("utf-8") + edited[end:]
        line = _first_import_line(tree)
        lines = edited.decode("utf-8").splitlines(keepends=True)
        lines.insert(line - 1, import_line + "\n")
        yield Variant("opaque", label, "".join(lines), (line,))


# --- added statements -------------------------------------------------------------------------
ADDED = {  # label -> (import it needs, statement); the index keeps every inserted name fresh
    "print": ("", "print('progress', {i})"),
    "counter": ("", "tick_{i} = 0"),
    "augmented": ("", "step_count_{i} = 0; step_count_{i} += 1"),
    "logging": ("import logging", "logging.debug('at %d', {i})"),
}


def _insertion_points(tree: ast.AST, lines: list[str]) -> list[tuple[int, int]]:
    """(line, indent) before which a statement may go: every statement of every function and loop
    body (not a docstring, not on its header's line) and the end of each such body."""
    points = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.For, ast.AsyncFor, ast.While)):
            continue
        body = node.body
        if body and body[0].lineno == node.lineno:
            continue  # `for x in y: step()`
        for index, stmt in enumerate(body):
            if index == 0 and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _is_docstring(stmt):
                continue
            first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
            points.add((first, _indent(lines[first - 1])))
        points.add((body[-1].end_lineno + 1, _indent(lines[body[0].lineno - 1])))
    return sorted(points, key=lambda point: (point[0], -point[1]))  # at one line, inner bodies end first


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def added(source: str) -> Iterator[Variant]:
    lines = source.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    tree = ast.parse(source)
    points = _insertion_points(tree, lines)
    if not points:
        return
    for label, (import_line, template) in ADDED.items():
        edited = list(lines)
        for index, (line, indent) in enumerate(reversed(points)):
            edited.insert(line - 1, " " * indent + template.format(i=index) + "\n")
        inserted = tuple(line for line, _ in points)
        if import_line:
            at = _first_import_line(tree)
            edited.insert(at - 1, import_line + "\n")
            inserted = tuple(sorted(inserted + (at,)))
        yield Variant("added", label, "".join(edited), inserted)


TRANSFORMATIONS: dict[str, Callable[[str], Iterator[Variant]]] = {"rename": renamed, "opaque": opaque, "added": added}


# --- running ----------------------------------------------------------------------------------
def findings(path: Path, source: str, rule) -> Findings:
    result = process_source(str(path), source.encode("utf-8"), Options(rules=(rule,)))
    return sorted((d.line, d.code) for d in result.diagnostics)


@dataclass(frozen=True)
class Mismatch:
    variant: Variant
    case: Case
    kind: str  # "before" or "ok"
    expected: Findings
    got: Findings

    @property
    def lost_only(self) -> bool:
        """Only findings went missing (for opaque producers: maybe the producer was the evidence)."""
        return set(self.got) < set(self.expected)

    def __str__(self) -> str:
        return f"{self.variant.transformation:>6} {self.variant.label:>9}  {self.case.id} ({self.kind}): {self.expected} -> {self.got}"


def check(case: Case, transformations=TRANSFORMATIONS) -> Iterator[tuple[Variant, Optional[Mismatch]]]:
    """Each variant of each of ``case``'s files, with its mismatch (None when the findings agree)."""
    rule = rule_for_module(case.rule_module)
    for kind, path in (("before", case.before), ("ok", case.ok)):
        if path is None:
            continue
        source = strip_markers(path.read_text(encoding="utf-8"))
        expected = findings(path, source, rule)
        for transform in transformations.values():
            for variant in transform(source):
                want, got = variant.shifted(expected), findings(path, variant.source, rule)
                yield variant, (Mismatch(variant, case, kind, want, got) if got != want else None)


# Suppressions that cover a GF302 finding of the kind above: under opaque producers the finding is
# lost, so GF001 rightly reports the suppression unused.
REVIEWED_UNUSED = frozenset({"unused_suppression/used"})


def accepted(mismatch: "Mismatch") -> bool:
    """A reviewed lost finding under opaque producers (or the unused suppression it leaves)."""
    if mismatch.variant.transformation != "opaque":
        return False
    if mismatch.case.id in REVIEWED_UNUSED:
        return {code for _, code in set(mismatch.got) - set(mismatch.expected)} <= {"GF001"}
    return mismatch.lost_only and mismatch.case.id in REVIEWED_LOST
