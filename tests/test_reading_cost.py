"""benchmarks/reading_cost.py on a tiny package whose closure is known by hand."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import reading_cost  # noqa: E402

FILES = {
    "fixer/__init__.py": "",
    "fixer/analysis/__init__.py": "",
    "codemods/__init__.py": "",
    "codemods/rule_a.py": (
        "from fixer.analysis import helpers\n"
        "from fixer.analysis.helpers import fact as again\n"  # a re-export of facts.fact
        "\n"
        "\n"
        "class RuleA:\n"
        "    code = \"GX001\"\n"
        "\n"
        "    def check(self, ctx: helpers.Unused) -> int:\n"  # an annotation: not followed
        "        return again(ctx) + helpers.twice(1)\n"
    ),
    "fixer/analysis/facts.py": (
        "from fixer.analysis.base import base_fact\n"
        "\n"
        "LIMIT = 3\n"
        "\n"
        "\n"
        "def fact(ctx):\n"
        "    return base_fact(ctx) + LIMIT\n"
        "\n"
        "\n"
        "def never_used():\n"
        "    return 0\n"
    ),
    "fixer/analysis/base.py": (
        "def base_fact(ctx):\n"
        "    from fixer.analysis.lazy import lazy_fact\n"  # an import inside a function
        "\n"
        "    return lazy_fact()\n"
    ),
    "fixer/analysis/lazy.py": "def lazy_fact():\n    return 1\n",
    "fixer/analysis/helpers.py": (
        "from fixer.analysis.facts import fact\n"
        "\n"
        "\n"
        "class Unused:\n"
        "    pass\n"
        "\n"
        "\n"
        "def twice(x):\n"
        "    position = x\n"  # a local: not the module's ``position``
        "    return 2 * position\n"
        "\n"
        "\n"
        "def position(x):\n"
        "    return x\n"
    ),
}


def _package(root: Path) -> dict:
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return reading_cost.load(root)


def test_the_closure_of_a_rule_follows_imports_attributes_and_lazy_imports(tmp_path: Path):
    modules = _package(tmp_path)
    start = reading_cost.rule_module(modules, "GX001")
    assert start == "codemods.rule_a"
    found = reading_cost.cost(modules, start)
    assert found["reached"] == [
        ("codemods.rule_a", "RuleA"),
        ("fixer.analysis.base", "base_fact"),
        ("fixer.analysis.facts", "LIMIT"),
        ("fixer.analysis.facts", "fact"),
        ("fixer.analysis.helpers", "twice"),
        ("fixer.analysis.lazy", "lazy_fact"),
    ]
    # RuleA 5, base_fact 4, LIMIT 1, fact 2, twice 3, lazy_fact 2
    assert (found["defs"], found["functions"], found["lines"]) == (6, 5, 17)
    assert (found["files"], found["analysis_files"]) == (5, 4)


def test_a_rule_is_found_by_its_module_path_too(tmp_path: Path):
    modules = _package(tmp_path)
    assert reading_cost.rule_module(modules, "codemods/rule_a.py") == "codemods.rule_a"
    assert reading_cost.rule_module(modules, "GX999") is None
