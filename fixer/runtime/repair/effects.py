"""Whether a statement may be run again, or moved, without changing what the program does: a
"recompute" repeats the statement that built a value, and is no repair when that statement
draws random numbers (the data change), reads or writes files, advances an iterator or changes
shared state in place. The calls it makes into functions and classes of its own file are looked
into (one level of their bodies, and the layers a class builds: ``nn.Dropout`` draws, a batch
norm's running statistics change in place). A call into a library we cannot see is taken as
it looks: torch's functions by their names."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.context import FileContext
from fixer.nodes import walk
from fixer.analysis.vocabulary import CHANGES

RANDOM = {
    "rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like", "normal", "bernoulli",
    "multinomial", "poisson", "uniform", "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
    "feature_alpha_dropout", "gumbel_softmax", "rrelu", "shuffle", "choice", "choices", "sample", "permutation",
    "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "RReLU", "randrange", "random", "gauss",
}
STATEFUL = {"BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LazyBatchNorm1d", "LazyBatchNorm2d"}
OUTSIDE = {"print", "open", "input", "save", "load", "write", "read", "next", "savefig", "add_scalar", "dump", "send", "recv"}


def _called(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _own(ctx: FileContext, name: str) -> list[ast.AST]:
    """The functions and classes of the file named ``name``, and the classes whose instance the
    file binds to ``name`` (``netD = Discriminator()``, ``self.net = Net()``)."""
    found = []
    for node in walk(ctx.tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            found.append(node)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                pairs = zip(target.elts, node.value.elts) if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple) else [(target, node.value)]
                for one, value in pairs:
                    bound = one.attr if isinstance(one, ast.Attribute) else one.id if isinstance(one, ast.Name) else ""
                    if bound == name and isinstance(value, ast.Call):
                        found.append(value)  # the constructor call: its name is looked at below
    return found


def _why(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Call):
        name = _called(node)
        text = ast.unparse(node.func)
        if name in RANDOM:
            return f"draws random numbers (`{text}`)"
        if name in STATEFUL:
            return f"updates running statistics in place (`{text}`)"
        if name in OUTSIDE:
            return f"reads or writes outside the computation (`{text}`)"
        if name.endswith("_") and not name.endswith("__") and isinstance(node.func, ast.Attribute):
            return f"changes a tensor in place (`{text}`)"
        if name in CHANGES and isinstance(node.func, ast.Attribute):
            return f"changes a container in place (`{text}`)"
    return None


def side_effect(ctx: FileContext, stmt: ast.stmt, depth: int = 3) -> Optional[str]:
    """Why running ``stmt`` again would change more than the value it builds; None when nothing says so."""
    return _look(ctx, stmt, depth, set())


def _look(ctx: FileContext, tree: ast.AST, depth: int, seen: set) -> Optional[str]:
    for node in walk(tree):
        why = _why(node)
        if why is not None:
            return why
        if depth and isinstance(node, ast.Call):
            for own in _own(ctx, _called(node)):
                if id(own) in seen:
                    continue
                seen.add(id(own))
                why = _look(ctx, own, depth - 1, seen)
                if why is not None:
                    return why
    return None
