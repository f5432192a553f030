"""The constants a flag read from a configuration object can hold (fixer/analysis/field_constants.py):
propagated through dataclass defaults, class attributes and the constructions the program makes;
unknown (None) when any path is unknown."""

from __future__ import annotations

import ast
import textwrap

import pytest

from fixer.analysis.field_constants import constant_values
from fixer.analysis.project_files import forget_project_files
from fixer.analysis.scopes import scopes
from fixer.context import FileContext


def _flag(source: str):
    """The values of the ``retain_graph=`` argument of the program's one ``backward`` call."""
    ctx = FileContext("cfg.py", textwrap.dedent(source))
    for scope in scopes(ctx):
        for node in ast.walk(scope.node):
            if isinstance(node, ast.keyword) and node.arg == "retain_graph":
                if any(s.node is not scope.node and s.node in ast.walk(scope.node) and node in ast.walk(s.node) for s in scopes(ctx)):
                    continue  # the keyword of a nested function: asked in its own scope
                return constant_values(ctx, scope, node.value)
    raise AssertionError("no retain_graph keyword")


DATACLASS = """
from dataclasses import dataclass, field

@dataclass
class Cfg:
    lr: float = 0.1
    keep: bool = {default}

class Trainer:
    def __init__(self, cfg):
        self.cfg = cfg

    def step(self, loss):
        loss.backward(retain_graph=self.cfg.keep)

cfg = {construction}
trainer = Trainer(cfg)
"""


@pytest.mark.parametrize(
    "default, construction, expected",
    [
        ("True", "Cfg()", {True}),
        ("True", "Cfg(keep=False)", {False}),
        ("False", "Cfg(0.1, True)", {True}),
        ("field(default=True)", "Cfg()", {True}),
        ("True", "Cfg(**options)", None),  # hidden arguments
        ("field(default_factory=bool)", "Cfg()", None),  # a factory, not a constant
        ("True", "Cfg(keep=flag)", None),  # an argument that is not a constant
    ],
)
def test_dataclass_field_through_a_trainer_field(default, construction, expected):
    values = _flag(DATACLASS.format(default=default, construction=construction))
    assert values == (frozenset(expected) if expected is not None else None)


def test_two_constructions_give_both_values():
    source = DATACLASS.format(default="True", construction="Cfg()") + "other = Trainer(Cfg(keep=False))\n"
    assert _flag(source) is None  # Trainer constructed twice: its field is not one construction's
    source = DATACLASS.format(default="True", construction="Cfg()") + "spare = Cfg(keep=False)\n"
    assert _flag(source) == frozenset({True, False})  # every construction of Cfg counts


@pytest.mark.parametrize("extra", ["cfg.keep = False\n", "setattr(cfg, 'keep', False)\n", "vars(cfg).update(keep=False)\n"])
def test_stores_the_analysis_cannot_follow_make_it_unknown(extra):
    assert _flag(DATACLASS.format(default="True", construction="Cfg()") + extra) is None


def test_a_copy_is_another_object():
    source = DATACLASS.format(default="True", construction="Cfg()")
    assert _flag(source + "copy = dataclasses.replace(cfg, keep=False)\n") == frozenset({True})  # the trainer's is unchanged
    given = source.replace("trainer = Trainer(cfg)", "trainer = Trainer(dataclasses.replace(cfg, keep=False))")
    assert _flag(given) is None


def test_class_attribute_read_through_the_class_and_an_instance():
    source = """
    class Settings:
        keep = True

    def train(loss):
        loss.backward(retain_graph=Settings.keep)
    """
    assert _flag(source) == frozenset({True})
    assert _flag(textwrap.dedent(source) + "Settings.keep = False\n") is None
    instance = """
    class Settings:
        keep = True

        def relax(self):
            self.keep = False

    settings = Settings()

    def train(loss):
        loss.backward(retain_graph=settings.keep)
    """
    assert _flag(instance) == frozenset({True, False})  # a method writes another constant


def test_constructor_parameter_default_and_arguments():
    source = """
    class Learner:
        def __init__(self, retain_graph=True):
            self.retain_graph = retain_graph

        def step(self, loss):
            loss.backward(retain_graph=self.retain_graph)

    learner = Learner({args})
    """
    assert _flag(source.format(args="")) == frozenset({True})
    assert _flag(source.format(args="retain_graph=False")) == frozenset({False})
    assert _flag(source.format(args="flag")) is None


def test_a_subclassed_or_inheriting_class_is_unknown():
    base = """
    class Settings:
        keep = True

    class Loud(Settings):
        keep = False

    settings = Settings()

    def train(loss):
        loss.backward(retain_graph=settings.keep)
    """
    assert _flag(base) is None  # the name is used by a subclass: its instances are not only constructions
    inherited = """
    class Base:
        keep = False

    class Settings(Base):
        pass

    settings = Settings()

    def train(loss):
        loss.backward(retain_graph=settings.keep)
    """
    assert _flag(inherited) is None


def test_module_constant_bound_once_or_more():
    once = """
    KEEP = True

    def train(loss):
        loss.backward(retain_graph=KEEP)
    """
    assert _flag(once) == frozenset({True})
    assert _flag(textwrap.dedent(once) + "for KEEP in (True, False):\n    pass\n") is None
    shadowed = """
    KEEP = True

    def train(loss, KEEP=False):
        loss.backward(retain_graph=KEEP)
    """
    assert _flag(shadowed) is None  # the parameter, not the module's name


def test_a_store_in_another_project_file_makes_it_unknown(tmp_path):
    main = textwrap.dedent(DATACLASS.format(default="True", construction="Cfg()"))
    (tmp_path / "main.py").write_text(main)
    path = str(tmp_path / "main.py")

    def flag():
        ctx = FileContext(path, main)
        scope = next(s for s in scopes(ctx) if getattr(s.node, "name", "") == "step")
        keyword = next(n for n in ast.walk(scope.node) if isinstance(n, ast.keyword) and n.arg == "retain_graph")
        return constant_values(ctx, scope, keyword.value)

    assert flag() == frozenset({True})
    (tmp_path / "other.py").write_text("class Other:\n    def __init__(self):\n        self.keep = False\n")
    forget_project_files()
    assert flag() == frozenset({True})  # another class's own field: not this object
    forget_project_files()
    (tmp_path / "tweaks.py").write_text("def relax(options):\n    options.keep = False\n")  # imports nothing
    assert flag() is None
    forget_project_files()
