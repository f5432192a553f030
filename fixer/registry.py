"""Rules are found by existing: every module in ``codemods/`` defines one Rule subclass, and the
module docstring is that rule's documentation."""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from typing import Iterable, Optional, Sequence

import codemods
from fixer.rule import Rule, iter_rule_classes, rule_url


class RegistryError(Exception):
    pass


@lru_cache(maxsize=None)
def all_rules() -> tuple[type[Rule], ...]:
    rules: list[type[Rule]] = []
    for info in sorted(pkgutil.iter_modules(codemods.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"codemods.{info.name}")
        found = [cls for cls in iter_rule_classes(vars(module)) if cls.__module__ == module.__name__]
        if len(found) != 1:
            raise RegistryError(f"codemods/{info.name}.py must define exactly one rule, found {len(found)}")
        rule = found[0]
        rule.documentation = (module.__doc__ or "").strip()
        rules.append(rule)
    return tuple(sorted(rules, key=lambda r: r.code))


def by_code(code: str) -> type[Rule]:
    for rule in all_rules():
        if rule.code == code.upper() or rule.name == code.lower():
            return rule
    raise KeyError(code)


def explanation(rule: type[Rule]) -> str:
    """A rule's documentation as `graphfix explain` prints it (markdown)."""
    return f"# {rule.name} ({rule.code})\n\n{rule.documentation}"


def documentation_url(rule: type[Rule]) -> Optional[str]:
    """The rule's section of the rules page: the one URL scheme of every output (``rule_url``)."""
    return rule_url(rule.code)


def select_rules(select: Sequence[str] = (), ignore: Sequence[str] = ()) -> list[type[Rule]]:
    """ruff-style selection: codes or prefixes (``GF1``), or rule names; empty select means every
    default rule (an opt-in rule, ``default = False``, runs only when a selector names it)."""
    rules = all_rules()
    chosen = [r for r in rules if (r.default if not select else _matches(r, select))]
    return [r for r in chosen if not _matches(r, ignore)]


def _matches(rule: type[Rule], patterns: Iterable[str]) -> bool:
    for pattern in patterns:
        pattern = pattern.strip()
        if pattern.upper() in ("ALL", "GF") or rule.code.startswith(pattern.upper()) or rule.name == pattern.lower():
            return True
    return False


def unknown_selectors(patterns: Iterable[str]) -> list[str]:
    rules = all_rules()
    return [p for p in patterns if p.strip() and not any(_matches(r, [p]) for r in rules)]
