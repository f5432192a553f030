"""The shape of the code, as a ratchet (design/architecture-review-2026-11-27.md, step 0): imports
inside functions in the analysis, analysis modules reaching into the engine, and modules over 400
lines may only become fewer and smaller; an import circle among top-level imports never comes
back. When a move removes one, lower its allowance here in the same commit."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ANALYSIS = ROOT / "fixer" / "analysis"

# file -> imports inside its functions (71 on 2026-11-27; none now: every import of the analysis is
# at the top level, and test_top_level_imports_of_the_analysis_form_no_circle holds)
LAZY_IMPORTS: dict[str, int] = {}
# analysis modules that import the engine's fix types (edits belong to the rules' edit builders)
ENGINE_IMPORTS: set[str] = set()  # (keyword_edit, remove_keyword moved to fixer/edits/keywords.py)
# module -> its length today; none may grow, no other may pass 400 lines
LONG_MODULES: dict[str, int] = {}


def _imports_inside_functions(tree: ast.AST) -> int:
    count = 0

    def visit(node: ast.AST, inside: bool) -> None:
        nonlocal count
        for child in ast.iter_child_nodes(node):
            if inside and isinstance(child, (ast.Import, ast.ImportFrom)):
                count += 1
            visit(child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return count


def _parsed(folder: Path) -> dict[str, ast.Module]:
    return {path.name: ast.parse(path.read_text()) for path in sorted(folder.glob("*.py"))}


def test_imports_inside_analysis_functions_only_become_fewer():
    found = {name: n for name, tree in _parsed(ANALYSIS).items() if (n := _imports_inside_functions(tree))}
    grown = {name: (n, LAZY_IMPORTS.get(name, 0)) for name, n in found.items() if n > LAZY_IMPORTS.get(name, 0)}
    assert not grown, f"imports inside functions added (now, allowed): {grown}"


def test_the_analysis_reaches_into_the_engine_only_where_it_did():
    engine = {name for name, tree in _parsed(ANALYSIS).items()
              if any(isinstance(n, ast.ImportFrom) and n.module == "fixer.rule" for n in ast.walk(tree))}
    assert engine <= ENGINE_IMPORTS, f"new imports of fixer.rule in the analysis: {sorted(engine - ENGINE_IMPORTS)}"


def test_no_module_grows_past_400_lines():
    lengths = {str(p.relative_to(ROOT)): p.read_text().count("\n") for folder in ("fixer", "codemods") for p in (ROOT / folder).rglob("*.py")}
    over = {path: (n, LONG_MODULES.get(path, 400)) for path, n in lengths.items() if n > LONG_MODULES.get(path, 400)}
    assert not over, f"modules over their allowance (lines, allowed): {over}"


def test_top_level_imports_of_the_analysis_form_no_circle():
    edges: dict[str, set[str]] = {}
    for name, tree in _parsed(ANALYSIS).items():
        edges[name[:-3]] = {
            node.module.rsplit(".", 1)[1] for node in tree.body
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fixer.analysis.")
        }
    state: dict[str, int] = {}

    def circle_from(module: str, path: list[str]) -> list[str]:
        state[module] = 1
        for other in sorted(edges.get(module, ())):
            if state.get(other) == 1:
                return path + [other]
            if other not in state and (found := circle_from(other, path + [other])):
                return found
        state[module] = 2
        return []

    for module in sorted(edges):
        if module not in state:
            assert not (found := circle_from(module, [module])), f"import circle: {' -> '.join(found)}"


def test_the_ratchet_counts_what_it_says():
    tree = ast.parse("import a\ndef f():\n    import b\n    def g():\n        from c import d\nclass K:\n    def m(self):\n        import e\n")
    assert _imports_inside_functions(tree) == 3


def test_no_rule_imports_another_rule():
    """A rule defers to another through a fact of the analysis (``undetached_fake_lines``,
    ``early_step_lines``), never by importing it and running its check."""
    found = {
        f"{name} -> {module}" for name, tree in _parsed(ROOT / "codemods").items() for node in ast.walk(tree)
        for module in ([node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
        if module == "codemods" or module.startswith("codemods.")
    }
    assert not found, f"rule modules importing rule modules: {sorted(found)}"
