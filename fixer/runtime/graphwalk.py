"""Questions asked of an autograd graph after an error: which nodes lost their saved tensors
(freed by a backward) or hold stale ones (modified in place), what a node reaches."""

from __future__ import annotations

from collections import deque
from typing import Any, Iterable, Iterator, Optional

from fixer.runtime.recorder import KEY, NodeRecord

_saved_names: dict[type, tuple[str, ...]] = {}


def record(node: Any) -> Optional[NodeRecord]:
    try:
        return node.metadata.get(KEY)
    except (AttributeError, RuntimeError):
        return None


def _probe(node: Any) -> Optional[str]:
    """The error raised by reading the node's saved tensors, if any."""
    names = _saved_names.get(type(node))
    if names is None:
        names = _saved_names[type(node)] = tuple(n for n in dir(node) if n.startswith("_saved_") or n == "saved_tensors")
    for name in names:
        try:
            getattr(node, name)
        except RuntimeError as exc:
            return str(exc)
    return None


def is_freed(node: Any) -> bool:
    message = _probe(node)
    return message is not None and ("freed" in message or "second time" in message)


def is_stale(node: Any) -> bool:
    message = _probe(node)
    return message is not None and "inplace operation" in message


def parameters_below(node: Any, depth: int = 3) -> list:
    """The leaves (parameters) within ``depth`` steps below the node: ``w`` below ``x @ w + b``,
    a weight below ``t()`` below the node that saved it."""
    found, frontier = [], [node]
    for _ in range(depth):
        frontier = [c for n in frontier for c, _ in n.next_functions if c is not None]
        found += [c.variable for c in frontier if hasattr(c, "variable")]
        frontier = [c for c in frontier if not hasattr(c, "variable")]
    return found


def walk(roots: Iterable[Any]) -> Iterator[tuple[Any, Optional[Any]]]:
    """(node, the node that reached it first) breadth-first from the roots, each node once."""
    seen: dict[int, Any] = {}
    queue = deque((node, None) for node in roots if node is not None)
    while queue:
        node, parent = queue.popleft()
        if id(node) in seen:
            continue
        seen[id(node)] = node  # held, so ids stay unique during the walk
        yield node, parent
        queue.extend((child, node) for child, _ in node.next_functions if child is not None)


def path_to(roots: Iterable[Any], wanted) -> Optional[list[Any]]:
    """Nodes from a root to the first node (breadth-first) for which ``wanted(node, record)``
    holds; ``record`` is the node's own, or the one it takes from the node that reached it."""
    parents: dict[int, Any] = {}
    records: dict[int, Optional[NodeRecord]] = {}
    for node, parent in walk(roots):
        parents[id(node)] = parent
        records[id(node)] = record(node) or (records[id(parent)] if parent is not None else None)
        if wanted(node, records[id(node)]):
            path = [node]
            while parents[id(path[-1])] is not None:
                path.append(parents[id(path[-1])])
            return path[::-1]
    return None


def inherited_records(roots: Iterable[Any]) -> dict[int, Optional[NodeRecord]]:
    """id(node) -> its record, or (a node built inside a library module's call, unrecorded) the
    record of the node that reached it first breadth-first from the roots."""
    records: dict[int, Optional[NodeRecord]] = {}
    for node, parent in walk(roots):
        records[id(node)] = record(node) or (records[id(parent)] if parent is not None else None)
    return records


def ancestors(roots: Iterable[Any], target: Any) -> list[Any]:
    """Nodes reachable from the roots through which ``target`` is reached (``target`` excluded),
    decided children first by an iterative depth-first walk."""
    reaching: dict[int, bool] = {id(target): True}
    held: list[Any] = []  # keeps every visited node alive, so ids stay unique
    for root in (r for r in roots if r is not None):
        stack = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                reaching[id(node)] = any(child is not None and reaching.get(id(child), False) for child, _ in node.next_functions)
                continue
            if id(node) in reaching:
                continue
            reaching[id(node)] = False  # on the way: a DAG has no cycle back to it
            held.append(node)
            stack.append((node, True))
            stack.extend((child, False) for child, _ in node.next_functions if child is not None and id(child) not in reaching)
    return [node for node in held if reaching[id(node)] and node is not target]


def leaves(node: Any) -> list[Any]:
    """The tensors (parameters) whose ``.grad`` the node's graph accumulates into."""
    return [n.variable for n, _ in walk([node]) if hasattr(n, "variable")]


def effective_record(path: list[Any], index: int) -> Optional[NodeRecord]:
    """A node built inside one torch call without a record of its own (the inner nodes of a
    composite op) takes the record of the nearest recorded node above it on the path."""
    for node in reversed(path[: index + 1]):
        found = record(node)
        if found is not None:
            return found
    return None
