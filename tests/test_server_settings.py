"""The language server's settings: the shapes editors send them in, and what wins over what."""

from __future__ import annotations

from fixer.registry import all_rules
from fixer.server.settings import EditorSettings, editor_settings, options_for

GF3 = {r.code for r in all_rules() if r.code.startswith("GF3") and r.default}


def test_the_shapes_editors_send_settings_in():
    nested = {"settings": {"graphfix": {"unsafe-fixes": True}, "pylsp": {"plugins": {}}}}
    assert editor_settings(nested) == (EditorSettings(unsafe_fixes=True), [])
    assert editor_settings({"graphfix": {"unsafeFixes": False}}) == (EditorSettings(unsafe_fixes=False), [])
    assert editor_settings({"select": "GF1, GF301", "ignore": []}) == (EditorSettings(select=("GF1", "GF301"), ignore=()), [])
    assert editor_settings(None) == editor_settings({}) == (EditorSettings(), [])


def test_bad_settings_are_named_and_left_out():
    settings, problems = editor_settings({"unsafe_fixes": "yes", "select": [3], "extend": []})
    assert settings == EditorSettings()
    assert problems == [
        "setting unsafe_fixes must be true or false",
        "setting select must be a list of rule codes, prefixes or names",
        "unknown setting extend (known: select, ignore, unsafeFixes)",
    ]
    assert editor_settings(["GF1"])[1] == ["settings must be an object, not list"]


def test_the_editor_wins_over_pyproject_and_what_it_leaves_unset_comes_from_there(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.graphfix]\nselect = ["GF3"]\nunsafe-fixes = true\n')
    path = tmp_path / "pkg" / "train.py"
    options, problems = options_for(path, EditorSettings())
    family = {r.code for r in all_rules() if r.code.startswith("GF3") and r.default}
    assert {r.code for r in options.rules} == family and options.unsafe and not problems
    options, problems = options_for(path, EditorSettings(select=("GF301", "GF999"), unsafe_fixes=False))
    assert [r.code for r in options.rules] == ["GF301"] and not options.unsafe
    assert problems == ["unknown rule selector(s): GF999 (see `graphfix rules`); left out"]
    options, _ = options_for(None, EditorSettings())  # a buffer not on disk: the defaults
    assert set(options.rules) == {r for r in all_rules() if r.default} and not options.unsafe



def test_per_file_ignores_apply_in_the_editor_too(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.graphfix]\nselect = ["GF3"]\n[tool.graphfix.per-file-ignores]\n"tests/*" = ["GF301"]\n')
    options, problems = options_for(tmp_path / "tests" / "test_train.py", EditorSettings())
    assert {r.code for r in options.rules} == GF3 - {"GF301"} and not problems
    options, _ = options_for(tmp_path / "train.py", EditorSettings())
    assert {r.code for r in options.rules} == GF3
