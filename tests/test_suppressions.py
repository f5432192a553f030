"""Suppression comments: by code or name, file-level, malformed ones warned about and never widened
to "every rule", and GF001 `unused-suppression` (opt-in) with its fix."""

from __future__ import annotations

import pytest

from fixer.engine import Options, process_source
from fixer.registry import all_rules, by_code, select_rules
from fixer.suppress import find_suppressions
from tests.test_cli import BUGGY, graphfix

LINE = "    running_loss += loss\n"  # the GF301 line of BUGGY (line 15)
RETAIN = BUGGY.replace("loss.backward()", "loss.backward(retain_graph=True)")  # GF302 on line 13 too


def codes(text: str, rules=None) -> list[tuple[int, str]]:
    options = Options(rules=tuple(rules or select_rules()))
    result = process_source("t.py", text.encode(), options)
    assert not result.errors, result.errors
    return [(d.line, d.code) for d in result.diagnostics]


def with_comment(comment: str, text: str = BUGGY) -> str:
    return text.replace(LINE, LINE.rstrip("\n") + "  " + comment + "\n")


def test_the_unsuppressed_file_has_both_findings():
    assert codes(RETAIN) == [(13, "GF302"), (15, "GF301")]


@pytest.mark.parametrize("comment", [
    "# graphfix: ignore[GF301]", "# graphfix: ignore[loss-accumulated-with-graph]", "# graphfix:ignore[gf301]",
    "# graphfix: ignore[GF302, GF301]", "# graphfix: ignore", "# graphfix: ignore[GF301]  # the reason",
    "# type: ignore  # graphfix: ignore[GF301]",
])
def test_a_line_suppression_by_code_or_name(comment):
    assert codes(with_comment(comment, RETAIN)) == [(13, "GF302")]


@pytest.mark.parametrize("comment", [
    "# graphfix: ignore [GF301]", "# graphfix: ignored", "# graphfix: ignore[", "# graphfix: ignore[]",
    "# graphfix: ignore GF301", "# graphfix: ignore-files", "# graphfix: disable[GF301]",
])
def test_a_malformed_suppression_suppresses_nothing_and_is_a_warning(comment):
    text = with_comment(comment, RETAIN)
    assert codes(text) == [(13, "GF302"), (15, "GF301")]
    [(line, col, message)] = find_suppressions(text).warnings
    assert line == 15 and text.splitlines()[14][col - 1:].startswith(comment.split("  ")[0][:3])
    assert "suppresses nothing" in message


@pytest.mark.parametrize("entry", ["GF999", "GF3", "loss-accumulated"])
def test_an_unknown_entry_suppresses_nothing_and_is_a_warning(entry):
    text = with_comment(f"# graphfix: ignore[{entry}]")
    assert codes(text) == [(15, "GF301")]
    [(_, _, message)] = find_suppressions(text).warnings
    assert f"unknown rule `{entry}`" in message and ("prefixes are not accepted" in message) == (entry == "GF3")
    # the known entries of the same list still work
    assert codes(with_comment(f"# graphfix: ignore[{entry}, GF301]")) == []


def test_a_directive_inside_a_string_is_not_a_comment():
    assert codes(BUGGY.replace(LINE, LINE.rstrip("\n") + '; s = "# graphfix: ignore"\n')) == [(15, "GF301")]


@pytest.mark.parametrize("comment, left", [
    ("# graphfix: ignore-file", []), ("# graphfix: ignore-file[GF302]", [(15, "GF301")]),
    ("# graphfix: ignore-file[needless-retain-graph, GF301]", []),
])
def test_file_level_suppression_anywhere_in_a_comment(comment, left):
    assert codes(f"{comment}\n" + RETAIN) == [(line + 1, code) for line, code in left]
    assert codes(RETAIN + f"x = 1  {comment}\n") == left


def test_unused_suppression_is_opt_in():
    rule = by_code("GF001")
    assert rule.name == "unused-suppression" and not rule.default
    assert rule not in select_rules() and rule in select_rules(["ALL"]) and rule in select_rules(["GF0"])
    assert select_rules(["unused-suppression"]) == [rule]


def test_unused_suppression_judges_every_named_rule_whatever_is_selected():
    gf001 = [by_code("GF001")]
    assert codes(with_comment("# graphfix: ignore[GF301]"), gf001) == []  # used: GF301 fires there
    assert codes(with_comment("# graphfix: ignore[GF302]"), gf001) == [(15, "GF001")]
    assert codes(with_comment("# graphfix: ignore"), gf001) == []
    assert codes(with_comment("# graphfix: ignore", BUGGY.replace(LINE, "    running_loss += loss.item()\n")), gf001) == []
    stale = BUGGY.replace(LINE, "    running_loss += loss.item()  # graphfix: ignore\n")
    assert codes(stale, gf001) == [(15, "GF001")]  # a bare ignore does not hide its own GF001
    assert codes(stale.replace("ignore\n", "ignore  # graphfix: ignore[GF001]\n"), gf001) == []


def test_unused_suppression_fix_removes_a_whole_comment_line_and_only_unused_entries():
    options = Options(rules=tuple(all_rules()), fix=True)
    text = "# graphfix: ignore-file[GF302]\n" + with_comment("# graphfix: ignore[GF301, GF107, GF999]")
    result = process_source("t.py", text.encode(), options)
    assert result.fixed == with_comment("# graphfix: ignore[GF301]")
    assert [d.code for d in result.remaining] == []


def test_cli_warns_about_malformed_suppressions_on_stderr(tmp_path):
    (tmp_path / "t.py").write_text(with_comment("# graphfix: ignore [GF301]"))
    out = graphfix("t.py", cwd=tmp_path)
    assert out.returncode == 1 and b"GF301" in out.stdout
    assert "t.py:15:27: warning: malformed suppression `# graphfix: ignore [GF301]`" in out.stderr.decode()
    assert b"warning" not in graphfix("-q", "t.py", cwd=tmp_path).stderr
    fixed = graphfix("--select", "GF001,GF301", "--fix", "t.py", cwd=tmp_path)
    assert fixed.returncode == 0 and "# graphfix" in (tmp_path / "t.py").read_text()  # GF001 leaves malformed ones alone

