"""The passes of a loop when its whole body is guarded: ``for i, b in enumerate(loader): if cond: ...``.

A loop whose body is one ``if`` without ``else`` (beside statements that cannot change what it
reads, such as a ``print``) runs that ``if``'s body on the passes its test selects and does
nothing the selected passes see on the others, exactly as ``if not cond: continue`` would. Those
selected passes are the loop's training iterations: values carried, graphs reused and gradients
accumulated cross from one selected pass to the next as they would without the guard. So every
question about "each iteration" asks about the guard's body (``pass_body``), and the guard does
not make what is inside it conditional (``is_pass_filter``).

A test that selects at most one pass (``i == 0``, ``epoch == last``: an equality on a name the
loop binds) is not a filter: its body runs once, not every iteration. A periodic test
(``(i + 1) % k == 0``) selects many.

Shared guards: several ``if`` statements of one pass with the same test (``if step % k == 0:``
around the backward, again around the step) run together or not at all when nothing in the loop
can change what the test reads (only names and constants, none bound or handed to a call in the
loop). On the passes the test selects they run as if unguarded, and the passes it skips run none
of them: each is a filter of the selected passes too (``is_pass_filter``), though the pass's other
statements run on every pass. A function's body is one pass of each call (``train_step(..., train)``
called in a batch loop): its shared guards run together or not at all on that call. One level in, the same holds for the lone guards such guards hold
(``if c: if train: loss.backward()`` beside ``if c: if train: opt.step()``) when nothing in the loop
rebinds their test. A shared guard holding one statement stands for it (``guarded_statement``)
and moves or goes with it (``guarded_unit``)."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.decided_tests import always_holds
from fixer.analysis.scopes import statement_index
from fixer.context import FileContext
from fixer.nodes import walk

LOOP_TYPES = (ast.For, ast.AsyncFor, ast.While)


def is_pass_filter(ctx: FileContext, node: ast.AST, child: Optional[ast.AST] = None) -> bool:
    """``node`` is a filter ``if`` of a loop (``child``, if given, is in its body, not its test)."""
    if not isinstance(node, ast.If) or child is not None and not any(child is s for s in node.body):
        return False
    return _filtered_loop(ctx, node) is not None or _shared_guard(ctx, node) or _always_true(ctx, node)


def _always_true(ctx: FileContext, node: ast.If) -> bool:
    """An ``if`` (no ``else``) of a pass (or of a guard there that selects passes) whose test the
    loop decides true on every pass (decided_tests): it selects every pass, the trivial filter."""
    child, holder = node, ctx.parent(node)
    while isinstance(holder, ast.If) and is_pass_filter(ctx, holder, child):
        child, holder = holder, ctx.parent(holder)  # inside a guard that itself selects passes
    loop = holder if isinstance(holder, LOOP_TYPES) and any(child is s for s in holder.body) else None
    return loop is not None and not node.orelse and always_holds(ctx, node.test, loop)


def periodic_guard(ctx: FileContext, node: ast.AST, loop: ast.AST) -> bool:
    """``node`` is an ``if`` (no ``else``) of the loop's own body (or of a filter's there) whose
    test selects every k-th pass (``i % k == 0``: the loop's variable through ``%``, ``//`` or ``&``, with nothing else the
    loop binds), so what it guards runs on many passes; over ``range(n)`` with constants, only
    when ``n`` exceeds ``k``."""
    if not isinstance(node, ast.If) or node.orelse or not _in_pass_of(ctx, node, loop):
        return False
    if not isinstance(loop, (ast.For, ast.AsyncFor)) or not _filters(loop, node) or not _stable(loop, node.test, _declared_global(ctx)):
        return False
    bound = {n.id for n in walk(loop.target) if isinstance(n, ast.Name)}
    periodic = [n for n in walk(node.test) if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Mod, ast.FloorDiv, ast.BitAnd))
                and any(isinstance(m, ast.Name) and m.id in bound for m in walk(n.left))]
    if not periodic:
        return False
    k = periodic[0].right
    count = loop.iter.args[-1] if isinstance(loop.iter, ast.Call) and getattr(loop.iter.func, "id", "") == "range" and len(loop.iter.args) == 1 else None
    if isinstance(k, ast.Constant) and isinstance(count, ast.Constant) and isinstance(k.value, int) and isinstance(count.value, int):
        return count.value > k.value
    return True


def _in_pass_of(ctx: FileContext, node: ast.stmt, loop: ast.AST) -> bool:
    """``node`` is a statement of the loop's own body, or of the body of an ``if`` there that runs
    on every pass it selects (a filter, or itself a periodic guard: ``if i % 1 == 0:``)."""
    parent = ctx.parent(node)
    if parent is loop:
        return any(node is s for s in getattr(loop, "body", ()))
    return (
        isinstance(parent, ast.If) and any(node is s for s in parent.body)
        and (is_pass_filter(ctx, parent, node) or periodic_guard(ctx, parent, loop))
    )


def _shared_guard(ctx: FileContext, node: ast.If) -> bool:
    """``node`` is one of several guards with the same stable, many-pass test in a pass's body,
    or alone in the body of such a guard whose peers each hold only a guard of its test."""
    return len(_peers(ctx, node)) > 1


def _peers(ctx: FileContext, node: ast.AST) -> list[ast.If]:
    """The shared guards that run exactly when ``node`` does (itself among them), or none: in a
    pass's body, those of its stable test; one level in (``if c: if train: opt.step()``), the
    lone guards of its test that its guard's peers hold, when nothing in the loop rebinds it."""
    if not isinstance(node, ast.If) or node.orelse:
        return []
    return ctx.memo(("shared_guard_peers", id(node)), lambda: _find_peers(ctx, node))


def _find_peers(ctx: FileContext, node: ast.If) -> list[ast.If]:
    holder = ctx.parent(node)
    if isinstance(holder, ast.If) and len(holder.body) == 1 and not holder.orelse:
        outer = _peers(ctx, holder)
        test = ast.dump(node.test, annotate_fields=False)
        inner = [g.body[0] for g in outer if len(g.body) == 1 and isinstance(g.body[0], ast.If) and not g.body[0].orelse]
        inner = [g for g in inner if ast.dump(g.test, annotate_fields=False) == test]
        if len(inner) < 2:
            return []
        loop = _pass_owner(ctx, enclosing_pass(ctx, holder) or [])
        stable = loop is not None and _filters(loop, node) and _stable(loop, node.test, _declared_global(ctx))
        return inner if stable and len(inner) > 1 else []
    block = getattr(holder, "body", None) if holder is not None else None
    loop = _pass_owner(ctx, block) if block else None
    if loop is None:
        return []
    test = ast.dump(node.test, annotate_fields=False)
    group = [g for g in shared_guards(loop, block, _declared_global(ctx)) if ast.dump(g.test, annotate_fields=False) == test]
    return group if any(node is g for g in group) else []


def enclosing_pass(ctx: FileContext, guard: ast.If) -> list[ast.stmt]:
    """The pass's body that holds ``guard`` through lone nested guards (``guard`` itself there)."""
    while isinstance(holder := ctx.parent(guard), ast.If) and len(holder.body) == 1:
        guard = holder
    return getattr(ctx.parent(guard), "body", [])


def guarded_unit(ctx: FileContext, stmt: ast.stmt) -> ast.stmt:
    """``stmt``, or the shared guard that holds only it (``if i % k == 0: loss.backward()``, also
    through nested shared guards): the statement that moves, or goes, with it."""
    parent = ctx.parent(stmt)
    while isinstance(parent, ast.If) and len(parent.body) == 1 and parent.body[0] is stmt and not parent.orelse and _shared_guard(ctx, parent):
        stmt, parent = parent, ctx.parent(parent)
    return stmt


def guarded_statement(ctx: FileContext, stmt: ast.stmt) -> ast.stmt:
    """What ``stmt`` runs on the passes it runs: the one statement of a filter or shared guard
    holding only it (``if i % k == 0: opt.step()``: ``opt.step()``), recursively; else ``stmt``."""
    while isinstance(stmt, ast.If) and len(stmt.body) == 1 and is_pass_filter(ctx, stmt, stmt.body[0]):
        stmt = stmt.body[0]
    return stmt


def same_guard(ctx: FileContext, a: ast.stmt, b: ast.stmt) -> bool:
    """Two units (``guarded_unit``) run in the same passes: both unguarded, or both shared guards
    with the same tests, nested alike."""
    return _tests(ctx, a) == _tests(ctx, b)


def movable_across(ctx: FileContext, unit: ast.stmt, span: list[ast.stmt]) -> bool:
    """``unit`` may move across the statements ``span`` of its pass: no shared guard, or nothing
    there changes what its tests read (a group's tests are stable only from its first guard to its
    last, ``inputs = inputs * 2.0`` may change ``inputs is not None``)."""
    tests, inner = [], unit
    while isinstance(inner, ast.If) and len(inner.body) == 1 and _shared_guard(ctx, inner):
        tests.append(inner.test)
        inner = inner.body[0]
    loop = _pass_owner(ctx, enclosing_pass(ctx, unit)) if tests else None
    return not tests or loop is not None and all(_stable(loop, test, _declared_global(ctx), span) for test in tests)


def _tests(ctx: FileContext, unit: ast.stmt) -> list[str]:
    """The tests of the shared guards ``unit`` is made of, outermost first."""
    tests = []
    while isinstance(unit, ast.If) and len(unit.body) == 1 and _shared_guard(ctx, unit):
        tests.append(ast.dump(unit.test, annotate_fields=False))
        unit = unit.body[0]
    return tests


def _declared_global(ctx: FileContext) -> frozenset[str]:
    """Names some function of the file may rebind (``global x``, ``nonlocal x``)."""
    return ctx.memo("declared_global", lambda: frozenset(n for node in statement_index(ctx).declarations for n in node.names))


def shared_guards(loop: ast.AST, block: list[ast.stmt], rebindable: frozenset[str] = frozenset()) -> list[ast.If]:
    """The guards of ``block`` (a pass of ``loop``) that share their test with another (kept on
    the loop); ``rebindable``: names a called function may rebind."""
    found = getattr(loop, "_graphfix_shared_guards", None)
    if found is None:
        groups: dict[str, list[ast.If]] = {}
        for stmt in block:
            if isinstance(stmt, ast.If) and not stmt.orelse and _filters(loop, stmt):
                groups.setdefault(ast.dump(stmt.test, annotate_fields=False), []).append(stmt)
        found = []
        for group in groups.values():
            # stable from the first guard to the last: what the pass does before or after them
            # cannot make one guard run without the others
            span = block[_index(block, group[0]) : _index(block, group[-1]) + 1]
            if len(group) > 1 and _stable(loop, group[0].test, rebindable, span):
                found += group
        loop._graphfix_shared_guards = found
    return found


_PURE = (ast.Name, ast.Constant, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare)


def _index(block: list[ast.stmt], stmt: ast.stmt) -> int:
    return next(i for i, s in enumerate(block) if s is stmt)


def _stable(loop: ast.AST, test: ast.expr, rebindable: frozenset[str], span: Optional[list[ast.stmt]] = None) -> bool:
    """``test`` reads only names and constants that nothing in the loop's body (or in ``span`` of
    it) binds or deletes, nor calls a method of or hands to a call (which may mutate the object),
    unless the test only asks for its identity (``x is not None``): it has one value per pass (or
    throughout the span)."""
    if not all(isinstance(n, _PURE) for n in walk(test)):
        return False
    names = {n.id for n in walk(test) if isinstance(n, ast.Name)}
    if names & rebindable:
        return False
    mutable = names - _identity_only(test)
    for node in (n for stmt in (loop.body if span is None else span) for n in walk(stmt)):
        if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)) and _root(node) in names:
            return False
        if isinstance(node, ast.Call) and any(_root(part) in mutable for part in [node.func, *node.args, *(k.value for k in node.keywords)]):
            return False
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return False
    return True


def _identity_only(test: ast.expr) -> set[str]:
    """Names ``test`` reads only as an operand of ``is`` / ``is not`` with a constant."""
    identity, elsewhere = set(), set()
    for node in walk(test):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Is, ast.IsNot)):
            pair = [node.left, node.comparators[0]]
            if any(isinstance(o, ast.Constant) for o in pair):
                identity |= {o.id for o in pair if isinstance(o, ast.Name)}
    for node in walk(test):
        if isinstance(node, ast.Name) and not _identity_operand(test, node):
            elsewhere.add(node.id)
    return identity - elsewhere


def _identity_operand(test: ast.expr, name: ast.Name) -> bool:
    return any(
        isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Is, ast.IsNot))
        and any(o is name for o in (node.left, node.comparators[0]))
        and any(isinstance(o, ast.Constant) for o in (node.left, node.comparators[0]))
        for node in walk(test)
    )


def loop_of_pass(ctx: FileContext, block: list[ast.stmt]) -> Optional[ast.AST]:
    """The loop whose body, or whose filter's body, is ``block``."""
    owner = ctx.parent(block[0]) if block else None
    if isinstance(owner, LOOP_TYPES) and owner.body is block:
        return owner
    return _filtered_loop(ctx, owner) if isinstance(owner, ast.If) and owner.body is block else None


PROTOCOL_METHODS = frozenset({"backward", "step", "zero_grad"})


def _pass_owner(ctx: FileContext, block: list[ast.stmt]) -> Optional[ast.AST]:
    """The loop of which ``block`` is a pass (``loop_of_pass``), or the function whose body it is:
    one call runs it once, as a pass does, so its shared guards run together or not at all."""
    owner = ctx.parent(block[0]) if block else None
    if isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef)) and owner.body is block:
        return owner
    return loop_of_pass(ctx, block)


def _filtered_loop(ctx: FileContext, node: ast.If) -> Optional[ast.AST]:
    inner, holder = node, ctx.parent(node)
    while isinstance(holder, ast.If) and not holder.orelse and any(s is inner for s in holder.body):
        inner, holder = holder, ctx.parent(holder)
    return holder if isinstance(holder, LOOP_TYPES) and any(f is node for f in filters(holder)) else None


def _inert(others: list[ast.stmt], guard: ast.If) -> bool:
    """The loop body's other statements cannot change what the filter reads (``print(...)``, a
    counter of its own): the passes it skips do nothing the selected ones see. No jump, nothing
    the filter mentions bound, called, or passed to a call; calls take only constants and names."""
    mentioned = {n.id for n in walk(guard) if isinstance(n, ast.Name)}
    for node in (n for stmt in others for n in walk(stmt)):
        if isinstance(node, (ast.Continue, ast.Break, ast.Return, ast.Raise, ast.Yield, ast.YieldFrom, ast.Await)):
            return False
        if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
            if _root(node) in mentioned:
                return False
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name).split(".")[0] in mentioned for a in node.names):
            return False
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in PROTOCOL_METHODS:
            return False  # a backward, step or zero_grad the skipped passes run changes what the selected ones see
        elif isinstance(node, ast.Call):
            arguments = node.args + [k.value for k in node.keywords]
            if _root(node.func) in mentioned or not all(_plain(a) for a in arguments):
                return False
            if any(_root(n) in mentioned for part in arguments for n in walk(part)):
                return False
    return True


def _plain(argument: ast.expr) -> bool:
    """A constant, a name or a formatted string of them: nothing a call could compute with."""
    if isinstance(argument, ast.JoinedStr):
        return all(_plain(v.value if isinstance(v, ast.FormattedValue) else v) for v in argument.values)
    return isinstance(argument, (ast.Constant, ast.Name))


def _root(node: ast.AST) -> Optional[str]:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def filters(loop: ast.AST) -> list[ast.If]:
    """The filter ``if`` statements, outermost first, that ``pass_body`` steps into (computed once
    per loop and kept on the node, which lives as long as its tree)."""
    found = getattr(loop, "_graphfix_filters", None)
    if found is None:
        found, body = [], loop.body
        while guard := next((s for s in body if _filters(loop, s) and not _repeated_test(s, body) and _inert([o for o in body if o is not s], s)), None):
            found.append(guard)
            body = guard.body
        loop._graphfix_filters = found
    return found


def _repeated_test(guard: ast.If, body: list[ast.stmt]) -> bool:
    """Another ``if`` of ``body`` has the same test: ``guard`` is one of several, not the pass."""
    test = ast.dump(guard.test, annotate_fields=False)
    return any(s is not guard and isinstance(s, ast.If) and ast.dump(s.test, annotate_fields=False) == test for s in body)


def pass_body(loop: ast.AST) -> list[ast.stmt]:
    """The statements one selected pass of ``loop`` runs: its body, or the body of the filter
    ``if`` (recursively) that is its whole body."""
    found = filters(loop)
    return found[-1].body if found else loop.body


def _filters(loop: ast.AST, stmt: ast.stmt) -> bool:
    """An ``if`` without ``else`` whose test may select many passes: not an equality that pins a
    name the loop binds (``i == 0``), though a periodic one may (``i % k == 0``)."""
    if not isinstance(stmt, ast.If) or stmt.orelse:
        return False
    bound = {n.id for n in walk(loop.target) if isinstance(n, ast.Name)} if isinstance(loop, (ast.For, ast.AsyncFor)) else set()
    return not any(
        isinstance(node, ast.Compare) and any(isinstance(op, (ast.Eq, ast.Is)) for op in node.ops)
        and any(_pins(operand, bound) for operand in [node.left, *node.comparators])
        for node in walk(stmt.test)
    )


def _pins(operand: ast.expr, bound: set[str]) -> bool:
    """An equality on ``operand`` may hold on at most one pass: it reads a bound name, unless only
    through a periodic operation (``%``, ``//``, ``&``) with no call (which may be anything)."""
    nodes = list(walk(operand))
    if not any(isinstance(n, ast.Name) and n.id in bound for n in nodes):
        return False
    periodic = any(isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Mod, ast.FloorDiv, ast.BitAnd)) for n in nodes)
    return not periodic or any(isinstance(n, ast.Call) for n in nodes)
