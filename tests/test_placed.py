"""fixer/analysis/placed.py: statements indexed by position answer as a scan of the list would, in
the list's order, whatever order the list is in (the analyses list a scope's nodes breadth first)."""

from __future__ import annotations

import ast

from fixer.analysis.placed import NOWHERE, Placed

SOURCE = """x = 1
for i in range(3):
    x = 2
    y = 3
x = 4
"""


def _placed():
    tree = ast.parse(SOURCE)
    first, loop, last = tree.body
    nodes = [last, first, loop.body[0], loop, loop.body[1]]  # not in source order
    return tree, loop, nodes, Placed(nodes)


def _scan(nodes, test):
    return [i for i, node in enumerate(nodes) if test(node)]


def test_statements_within_a_loop_are_those_under_it_in_list_order():
    tree, loop, nodes, placed = _placed()
    under = {id(n) for n in ast.walk(loop)}
    assert placed.starting_within(loop) == _scan(nodes, lambda n: id(n) in under) == [2, 3, 4]
    assert placed.starting_within(tree) == [0, 1, 2, 3, 4]  # a module holds every statement


def test_statements_before_a_point_and_the_last_of_them_in_the_list():
    _, loop, nodes, placed = _placed()
    point = (loop.body[1].lineno, loop.body[1].col_offset)  # ``y = 3``
    before = _scan(nodes, lambda n: (n.lineno, n.col_offset) < point)
    assert placed.starting_before(point) == before == [1, 2, 3]
    assert placed.starting_before(point, inclusive=True) == [1, 2, 3, 4]
    assert placed.last_before(point) == max(before) == 3
    assert placed.last_before((1, 0)) == -1 and NOWHERE.last_before((9, 0)) == -1


def test_a_statement_listed_twice_is_found_at_both_places():
    tree = ast.parse(SOURCE)
    first = tree.body[0]
    assert Placed([first, tree.body[2], first]).of(first) == [0, 2]
    assert Placed([first]).of(tree.body[2]) == []
