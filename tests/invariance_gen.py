"""Refactored variants of a fixture program for the refactoring-invariance measurement (issue 9).

Each transformation turns one program into an equivalent one whose code is arranged the way real
training code is, or says why it does not apply (no training loop, a ``break`` in its body...):

  T0 control      the program re-printed by ``ast.unparse`` (what every other variant also is)
  T1 function     the training loop body becomes ``train_step(...)`` (inputs as parameters,
                  rebound values returned and reassigned)
  T2 method       the body becomes ``Trainer.step`` with its state on ``self``
  T3 module       module-level classes and functions move to ``helpers.py`` (absolute import),
                  the same in a package (``from .helpers import ...``), or the backpropagated
                  loss expression becomes ``helpers.compute_loss(...)``
  T4 container    the backpropagated value is read back from a dict, a tuple or an attribute
  T5 guard        the loop body, or each backward/step statement, under an always-true ``if``

A variant is a set of files; ``main`` is the program to execute, ``checked`` the files graphfix
analyses. Whether a variant preserves the program's meaning is checked by executing it
(benchmarks/invariance.py, tests/test_invariance.py), not assumed.
"""

from __future__ import annotations

import ast
import copy
import re
from dataclasses import dataclass
from typing import Callable, Optional, Union

from tests.invariance_scope import backpropagated, bound_in_nested, calls_attribute, fresh, plan, training_loop
from tests.invariance_t3 import extract_loss, move_definitions

MAIN = "train.py"
RUN_PACKAGE = "import runpy\n\nglobals().update(runpy.run_module('pkg.train', run_name='__main__'))\n"


@dataclass(frozen=True)
class Variant:
    transform: str
    files: dict  # relative path -> text
    main: str  # the file to execute
    checked: tuple  # the files graphfix analyses


Outcome = Union[Variant, str]  # a variant, or why the transformation does not apply


def single(transform: str, tree: ast.Module) -> Variant:
    return Variant(transform, {MAIN: ast.unparse(ast.fix_missing_locations(tree)) + "\n"}, MAIN, (MAIN,))


def control(tree: ast.Module) -> Outcome:
    return single("T0 control", tree)


def _names(names: list[str], ctx: ast.expr_context) -> ast.expr:
    if len(names) == 1:
        return ast.Name(names[0], ctx)
    return ast.Tuple([ast.Name(n, ctx) for n in names], ctx)


def _insert_before(tree: ast.Module, anchor: ast.stmt, nodes: list) -> None:
    index = tree.body.index(anchor)
    tree.body[index:index] = nodes


def _function(name: str, params: list[str], body: list) -> ast.FunctionDef:
    arguments = ast.arguments(posonlyargs=[], args=[ast.arg(p) for p in params], kwonlyargs=[], kw_defaults=[], defaults=[])
    return ast.FunctionDef(name, arguments, body, [], None)


def extract_function(tree: ast.Module) -> Outcome:
    p = plan(tree)
    if isinstance(p, str):
        return p
    name = fresh(tree, "train_step")
    body = list(p.loop.body)
    if p.rebound:
        body.append(ast.Return(_names(p.rebound, ast.Load())))
    call = ast.Call(ast.Name(name, ast.Load()), [ast.Name(n, ast.Load()) for n in p.params], [])
    p.loop.body = [ast.Assign([_names(p.rebound, ast.Store())], call) if p.rebound else ast.Expr(call)]
    _insert_before(tree, p.top, [_function(name, p.params, body)])
    return single("T1 function", tree)


class _ToSelf(ast.NodeTransformer):
    """Name -> self.<attribute> for the state names, except where a nested scope rebinds them."""

    def __init__(self, receiver: str, attributes: dict, keep: frozenset = frozenset()) -> None:
        self.receiver, self.attributes, self.keep = receiver, attributes, keep

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.attributes and node.id not in self.keep:
            return ast.copy_location(ast.Attribute(ast.Name(self.receiver, ast.Load()), self.attributes[node.id], node.ctx), node)
        return node

    def _nested(self, node: ast.AST) -> ast.AST:
        inner = _ToSelf(self.receiver, self.attributes, self.keep | frozenset(bound_in_nested(node)))
        for field, value in ast.iter_fields(node):
            if isinstance(value, list):
                setattr(node, field, [inner.visit(v) if isinstance(v, ast.AST) else v for v in value])
            elif isinstance(value, ast.AST):
                setattr(node, field, inner.visit(value))
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = _nested
    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _nested


def trainer_method(tree: ast.Module) -> Outcome:
    p = plan(tree)
    if isinstance(p, str):
        return p
    if set(p.targets) & set(p.rebound) or p.loop.orelse or not isinstance(p.loop, (ast.For, ast.While)):
        return "the body rebinds the loop variable, or the loop has an else clause"
    if isinstance(p.loop, ast.For) and not all(isinstance(n, (ast.Name, ast.Tuple, ast.List, ast.Load, ast.Store)) for n in ast.walk(p.loop.target)):
        return "the loop target is not a plain name"
    defined = {s.name for s in p.loop.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    for node in ast.walk(ast.Module(p.loop.body, [])):
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.ExceptHandler)) or (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name not in defined and node.name in p.rebound
        ):
            return "the body binds a name by import, except or a nested definition"
    state = [n for n in p.params if n not in p.targets] + [n for n in p.rebound if n not in p.params]
    attributes = {n: {"self": "owner", "step": "step_"}.get(n, n) for n in state}  # never hide the method
    init_names = [n for n in p.params if n not in p.targets]
    cls, instance = fresh(tree, "Trainer"), fresh(tree, "trainer")
    init = _function("__init__", ["self"] + [attributes[n] for n in init_names], [
        ast.Assign([ast.Attribute(ast.Name("self", ast.Load()), attributes[n], ast.Store())], ast.Name(attributes[n], ast.Load())) for n in init_names
    ] or [ast.Pass()])
    body = []
    for stmt in p.loop.body:
        body.append(_ToSelf("self", attributes, frozenset(defined)).visit(stmt))
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stmt.name in attributes:
            body.append(ast.Assign([ast.Attribute(ast.Name("self", ast.Load()), attributes[stmt.name], ast.Store())], ast.Name(stmt.name, ast.Load())))
    method = _function("step", ["self"] + p.targets, body)
    _insert_before(tree, p.top, [ast.ClassDef(cls, [], [], [init, method], [])])
    create = ast.Assign([ast.Name(instance, ast.Store())], ast.Call(ast.Name(cls, ast.Load()), [ast.Name(n, ast.Load()) for n in init_names], []))
    step = ast.Attribute(ast.Name(instance, ast.Load()), "step", ast.Load())
    p.loop.body = [ast.Expr(ast.Call(step, [ast.Name(n, ast.Load()) for n in p.targets], []))]
    if isinstance(p.loop, ast.While):
        p.loop.test = _ToSelf(instance, attributes).visit(p.loop.test)
    back = [ast.Assign([ast.Name(n, ast.Store())], ast.Attribute(ast.Name(instance, ast.Load()), attributes[n], ast.Load())) for n in p.rebound]
    index = p.block.index(p.loop)
    p.block[index:index + 1] = [create, p.loop] + back
    return single("T2 method", tree)


def _reads_through(block: list, start: int, name: str, read: Callable[[], ast.expr]) -> int:
    """Replace loads of ``name`` in block[start:] up to the next statement rebinding it."""
    count = 0
    for stmt in block[start:]:
        if any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load) for n in ast.walk(stmt)):
            break
        for parent in ast.walk(stmt):
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)) and name in bound_in_nested(parent):
                continue
            for field, value in ast.iter_fields(parent):
                items = value if isinstance(value, list) else [value]
                for k, item in enumerate(items):
                    if isinstance(item, ast.Name) and item.id == name and isinstance(item.ctx, ast.Load):
                        count += 1
                        if isinstance(value, list):
                            value[k] = read()
                        else:
                            setattr(parent, field, read())
    return count


def container(kind: str) -> Callable[[ast.Module], Outcome]:
    def transform(tree: ast.Module) -> Outcome:
        found = backpropagated(tree)
        if found is None:
            return "no backpropagated name assigned in the same block"
        block, index, name = found
        holder = fresh(tree, "out")
        value = ast.Name(name, ast.Load())
        if kind == "dict":
            wrapped, read = ast.Dict([ast.Constant(name)], [value]), lambda: ast.Subscript(ast.Name(holder, ast.Load()), ast.Constant(name), ast.Load())
        elif kind == "tuple":
            wrapped, read = ast.Tuple([value], ast.Load()), lambda: ast.Subscript(ast.Name(holder, ast.Load()), ast.Constant(0), ast.Load())
        else:
            cls = fresh(tree, "StepOutput")
            wrapped, read = ast.Call(ast.Name(cls, ast.Load()), [value], []), lambda: ast.Attribute(ast.Name(holder, ast.Load()), name, ast.Load())
        if not _reads_through(block, index + 1, name, read):
            return "the backpropagated name is not read again in its block"
        block.insert(index + 1, ast.Assign([ast.Name(holder, ast.Store())], wrapped))
        if kind == "attribute":
            init = _function("__init__", ["self", name], [ast.Assign([ast.Attribute(ast.Name("self", ast.Load()), name, ast.Store())], ast.Name(name, ast.Load()))])
            tree.body.insert(_after_imports(tree), ast.ClassDef(cls, [], [], [init], []))
        return single(f"T4 {kind}", tree)

    return transform


def _after_imports(tree: ast.Module) -> int:
    index = 0
    for i, stmt in enumerate(tree.body):
        if isinstance(stmt, (ast.Import, ast.ImportFrom)) or (i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            index = i + 1
        else:
            break
    return index


def _guard(loop: ast.AST, modulo: bool) -> Optional[ast.expr]:
    """An always-true condition on the loop's counter (or its item), never a constant."""
    if not isinstance(loop, ast.For):
        return None
    target, it = loop.target, loop.iter
    func = it.func.id if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) else None
    counter = None
    if isinstance(target, ast.Name) and func == "range" and (len(it.args) == 1 or _non_negative(it.args[0])):
        counter = target.id
    elif isinstance(target, ast.Tuple) and isinstance(target.elts[0], ast.Name) and func == "enumerate" and (len(it.args) == 1 and not it.keywords):
        counter = target.elts[0].id
    if counter and modulo:
        return ast.Compare(ast.BinOp(ast.Name(counter, ast.Load()), ast.Mod(), ast.Constant(1)), [ast.Eq()], [ast.Constant(0)])
    if counter:
        return ast.Compare(ast.Name(counter, ast.Load()), [ast.GtE()], [ast.Constant(0)])
    item = target.elts[0] if isinstance(target, ast.Tuple) and target.elts else target
    if isinstance(item, ast.Name):
        return ast.Compare(ast.Name(item.id, ast.Load()), [ast.IsNot()], [ast.Constant(None)])
    return None


def _non_negative(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, int) and node.value >= 0


def guarded(whole_body: bool) -> Callable[[ast.Module], Outcome]:
    def transform(tree: ast.Module) -> Outcome:
        loop = training_loop(tree)
        guard = _guard(loop, modulo=not whole_body) if loop else None
        if guard is None:
            return "no for loop with a counter or item to test"
        if whole_body:
            loop.body = [ast.If(guard, loop.body, [])]
        else:
            names = ("backward", "step", "zero_grad")
            loop.body = [ast.If(copy.deepcopy(guard), [s], []) if calls_attribute(s, names) and not isinstance(s, (ast.FunctionDef, ast.ClassDef)) else s for s in loop.body]
        return single("T5 guard body" if whole_body else "T5 guard steps", tree)

    return transform


def _moved(transform: str, package: bool, what: str) -> Callable[[ast.Module], Outcome]:
    def run(tree: ast.Module) -> Outcome:
        files = (move_definitions if what == "defs" else extract_loss)(tree, "helpers", package)
        if isinstance(files, str):
            return files
        main, helpers = files
        if package:
            texts = {"pkg/__init__.py": "", "pkg/helpers.py": helpers, "pkg/train.py": main, "run.py": RUN_PACKAGE}
            return Variant(transform, texts, "run.py", ("pkg/train.py", "pkg/helpers.py"))
        return Variant(transform, {MAIN: main, "helpers.py": helpers}, MAIN, (MAIN, "helpers.py"))

    return run


TRANSFORMS: dict[str, Callable[[ast.Module], Outcome]] = {
    "T0 control": control,
    "T1 function": extract_function,
    "T2 method": trainer_method,
    "T3 defs module": _moved("T3 defs module", False, "defs"),
    "T3 defs package": _moved("T3 defs package", True, "defs"),
    "T3 loss module": _moved("T3 loss module", False, "loss"),
    "T4 dict": container("dict"),
    "T4 tuple": container("tuple"),
    "T4 attribute": container("attribute"),
    "T5 guard body": guarded(True),
    "T5 guard steps": guarded(False),
}


SUPPRESSION = re.compile(r"#\s*graphfix\s*:", re.IGNORECASE)


def variants(source: str) -> dict[str, Outcome]:
    """Every transformation of ``source``: a Variant or the reason it does not apply. Variants are
    written by ``ast.unparse``, which drops comments: a program whose findings depend on its
    ``# graphfix:`` comments cannot be carried over."""
    if SUPPRESSION.search(source):
        return dict.fromkeys(TRANSFORMS, "suppression comments")
    return {name: transform(ast.parse(source)) for name, transform in TRANSFORMS.items()}
