"""``--fix --interactive`` without a terminal: the decisions (fixer/review.py), the questions read
from a stream (fixer/interactive.py) and the CLI's usage errors. tests/test_interactive_tmux.py
drives the real command on a terminal."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from fixer.engine import FileResult, Options, process_source, run_rules
from fixer.interactive import HELP, Terminal, review_results
from fixer.registry import all_rules, by_code
from fixer.review import Answer, Tally, choose, review
from fixer.rule import Applicability, Diagnostic, Edit, Fix, Rule
from tests.test_cli import graphfix
from tests.test_fix_check import PROGRAM, REFUSAL, AddsRetain, Chain
from tests.test_notebooks import notebook

TRAIN = """\
import torch

model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
batches = [torch.randn(4, 2) for _ in range(3)]

total = 0.0
second = 0.0
third = 0.0
for batch in batches:
    optimizer.zero_grad()
    loss = model(batch).pow(2).mean()
    loss.backward()
    optimizer.step()
    total += loss
    second += loss
    third = third + loss
print(total, second, third)
"""
LINES = ("total += loss\n", "second += loss\n", "third = third + loss\n")


def fixed(*which: int, text: str = TRAIN) -> str:
    """TRAIN with the GF301 fixes of the accumulations numbered ``which`` (0, 1, 2)."""
    for index in which:
        text = text.replace(LINES[index], LINES[index].replace("loss\n", "loss.item()\n"))
    return text


def finding(line: int, start: int, end: int, text: str = "x") -> Diagnostic:
    fix = Fix((Edit(start, end, text),), Applicability.SAFE)
    return Diagnostic("GF999", "test", "m", line, 0, line, 1, fix)


class Script:
    """Answers in order; records which findings were asked about."""

    def __init__(self, answers: str) -> None:
        self.answers = [Answer(a) for a in answers]
        self.asked: list[Diagnostic] = []

    def __call__(self, diagnostic, text, number, total):
        self.asked.append(diagnostic)
        return self.answers.pop(0)


# --- choose: one round -------------------------------------------------------------------------
def test_each_fix_is_asked_about_in_file_order_and_y_n_decide_it():
    a, b, c = finding(3, 30, 31), finding(1, 0, 1), finding(2, 10, 11)
    script, tally = Script("yny"), Tally()
    accepted, declined, mode = choose([a, b, c], "", script, tally, None, print)
    assert script.asked == [b, c, a]
    assert (accepted, declined, mode) == ([b, a], [c], None)
    assert (tally.accepted, tally.skipped, tally.quit) == (2, 1, False)


def test_a_accepts_the_rest_of_the_file_without_asking():
    found = [finding(n, 10 * n, 10 * n + 1) for n in range(1, 5)]
    script, tally = Script("na"), Tally()
    accepted, declined, mode = choose(found, "", script, tally, None, print)
    assert script.asked == found[:2] and accepted == found[1:] and declined == found[:1] and mode is Answer.ALL
    # ... and in the file's later rounds
    later = [finding(9, 90, 91)]
    assert choose(later, "", Script(""), tally, mode, print)[0] == later


@pytest.mark.parametrize("key", ["d", "q"])
def test_d_skips_the_rest_of_the_file_and_q_everything_after(key):
    found = [finding(n, 10 * n, 10 * n + 1) for n in range(1, 5)]
    script, tally = Script("y" + key), Tally()
    accepted, declined, mode = choose(found, "", script, tally, None, print)
    assert len(script.asked) == 2 and accepted == found[:1] and declined == found[1:]
    assert (tally.accepted, tally.skipped, tally.quit) == (1, 3, key == "q")


def test_a_fix_overlapping_an_accepted_one_is_not_offered_but_one_overlapping_a_skipped_one_is():
    first, overlapping, after = finding(1, 0, 5), finding(1, 3, 8), finding(2, 20, 21)
    notes: list[str] = []
    script = Script("yy")
    accepted, declined, _ = choose([first, overlapping, after], "", script, Tally(), None, notes.append)
    assert script.asked == [first, after] and accepted == [first, after] and declined == []
    assert notes == ["GF999 (line 1): its fix overlaps one accepted above; not offered now"]
    script = Script("ny")
    assert choose([first, overlapping], "", script, Tally(), None, print)[0] == [overlapping]


# --- review: rounds on real rules --------------------------------------------------------------
def start(text: str, *rules):
    rules = rules or tuple(all_rules())
    found, crashes = run_rules("t.py", text, rules, "\n", False)
    assert not crashes
    return found, Options(rules=rules, fix=True, unsafe=True)


def test_only_the_accepted_fixes_are_applied():
    found, options = start(TRAIN)
    outcome = review("t.py", TRAIN, found, options, "\n", options.rules, Script("yny"), Tally(), print)
    assert outcome.text == fixed(0, 2) and outcome.problems == []
    assert [(d.code, d.line, d.fix is not None) for d in outcome.findings] == [("GF301", 16, True)]


def test_a_chain_fixed_link_by_link_is_offered_round_after_round():
    text = "a = 1  # todo\nb = 2  # todo\nc = 3  # todo\nloss.backward()\n"
    found, options = start(text, Chain)
    script = Script("yyn")
    outcome = review("t.py", text, found, options, "\n", options.rules, script, Tally(), print)
    assert [d.line for d in script.asked] == [1, 2, 3]
    assert outcome.text == text.replace("todo", "done, checked", 2)
    assert [d.line for d in outcome.findings] == [3]


def test_a_declined_finding_is_not_offered_again_in_a_later_round():
    text = "a = 1  # todo\nb = 2  # todo\nloss.backward()\n"
    found, options = start(text, Chain, by_code("GF301"))
    script = Script("n")
    assert review("t.py", text, found, options, "\n", options.rules, script, Tally(), print).text == text
    assert len(script.asked) == 1


def test_an_accepted_fix_that_brings_in_a_finding_is_refused_and_says_why():
    found, options = start(PROGRAM, AddsRetain, by_code("GF301"), by_code("GF302"))
    notes: list[str] = []
    tally = Tally()
    outcome = review("t.py", PROGRAM, found, options, "\n", options.rules, Script("yy"), tally, notes.append)
    assert (tally.accepted, tally.refused) == (1, 1)
    assert outcome.text == PROGRAM.replace("running_loss += loss", "running_loss += loss.item()")
    assert notes == [REFUSAL]
    [kept] = outcome.findings
    assert (kept.code, kept.fix, kept.fix_refused) == ("GF906", None, REFUSAL)


class Breaks(Rule):
    """A fix that breaks the syntax: ``print(`` loses its parenthesis."""

    code, name, summary = "GF905", "test-breaks-syntax", "breaks code"

    def check(self, ctx):
        at = ctx.source.index("print(") + 5
        yield self.diagnostic_at(ctx, at, at + 1, "m", [Edit(at, at + 1, " ")])


def test_accepted_fixes_that_break_the_code_are_not_applied_and_the_problem_is_reported():
    found, options = start(TRAIN, Breaks, by_code("GF301"))
    tally = Tally()
    outcome = review("t.py", TRAIN, found, options, "\n", options.rules, Script("nyyy"), tally, print)
    assert outcome.text == TRAIN and (tally.accepted, tally.skipped, tally.refused) == (0, 1, 3)
    [problem] = outcome.problems
    assert problem.startswith("fix by GF301, GF905 produced invalid code (") and problem.endswith("line 18); these fixes were not applied")


# --- the terminal's questions ------------------------------------------------------------------
def test_answers_are_read_line_by_line_help_on_question_mark_or_unknown_and_eof_is_quit():
    out = io.StringIO()
    terminal = Terminal(io.StringIO("?\nx\n\n  Y \n"), out)
    assert terminal.ask("(1/2)") is Answer.YES
    assert out.getvalue().count(HELP) == 2 and out.getvalue().count("(1/2) Apply this fix") == 4
    assert "\033[" not in out.getvalue()  # not a terminal: no colour
    assert Terminal(io.StringIO(""), io.StringIO()).ask("(1/1)") is Answer.QUIT


def test_colour_marks_removed_and_added_lines():
    out = io.StringIO()
    Terminal(io.StringIO(), out, colour=True).show_diff("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n")
    assert out.getvalue().splitlines() == [
        "\033[1m--- a/x\033[0m", "\033[1m+++ b/x\033[0m", "\033[36m@@ -1 +1 @@\033[0m", "\033[31m-old\033[0m", "\033[32m+new\033[0m",
    ]


# --- files -------------------------------------------------------------------------------------
OPTIONS = Options(rules=tuple(all_rules()), fix=True)


def results_for(*paths: Path) -> list[FileResult]:
    return [process_source(str(p), p.read_bytes(), OPTIONS) for p in paths]


def run_review(answers: str, *paths: Path):
    out = io.StringIO()
    results = results_for(*paths)
    session = review_results(results, lambda path: OPTIONS, Terminal(io.StringIO(answers), out))
    return session, results, out.getvalue()


def test_q_writes_what_the_file_accepted_and_reviews_no_other_file(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    for path in (a, b):
        path.write_text(TRAIN)
    session, results, out = run_review("y\nq\n", a, b)
    assert a.read_text() == fixed(0) and b.read_text() == TRAIN
    assert out.count("Apply this fix") == 2 and "b.py" not in out
    assert out.endswith("graphfix: 1 fix(es) accepted, 2 skipped; 1 file(s) written; 1 file(s) with fixes not reviewed\n")
    assert [r.written for r in results] == [True, False] and results[0].fixed == fixed(0)
    assert [d.line for d in results[0].remaining] == [16, 17] and results[1].fixed is None
    assert [d.line for d in results[1].remaining] == [15, 16, 17]  # the run's --fix had none left


def test_d_moves_to_the_next_file_and_a_accepts_the_rest_of_it(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    for path in (a, b):
        path.write_text(TRAIN)
    session, results, out = run_review("d\nn\na\n", a, b)
    assert a.read_text() == TRAIN and b.read_text() == fixed(1, 2)
    assert out.count("Apply this fix") == 3 and session.written == 1
    assert not results[0].changed and results[1].written


def test_a_file_changed_while_the_user_answers_is_not_overwritten(tmp_path):
    path = tmp_path / "a.py"
    path.write_text(TRAIN)
    results = results_for(path)

    class Editing(io.StringIO):
        def readline(self, *args):
            path.write_text(TRAIN + "# edited\n")
            return "a\n"

    session = review_results(results, lambda p: OPTIONS, Terminal(Editing(), io.StringIO()))
    assert path.read_text() == TRAIN + "# edited\n" and session.written == 0
    assert results[0].errors == ["changed while being fixed; not written"] and not results[0].written


def test_a_notebook_is_reviewed_cell_by_cell(tmp_path):
    head, loop = TRAIN.split("for batch")
    cells = [head, "for batch" + loop]
    path = tmp_path / "nb.ipynb"
    path.write_text(notebook(cells))
    session, results, out = run_review("n\ny\nn\n", path)
    assert path.read_text() == notebook([head, fixed(1, text="for batch" + loop)])
    assert f"--- {path}:cell 3\n" in out and f"{path}:cell 3:7:5: GF301" in out
    assert json.loads(path.read_text())["cells"][0] == json.loads(notebook(cells))["cells"][0]
    assert results[0].cells and [d.line for d in results[0].remaining] == [6, 8]


# --- the command line --------------------------------------------------------------------------
@pytest.mark.parametrize("args, message", [
    (["--interactive", "t.py"], "give --fix"),
    (["--diff", "--interactive", "t.py"], "not --diff"),
    (["--fix", "--interactive", "-"], "stdin"),
    (["--fix", "--interactive", "--stdin-filename", "t.py"], "stdin"),
    (["--fix", "--interactive", "t.py"], "needs a terminal on stdin"),
])
def test_usage_errors_exit_2_and_write_nothing(tmp_path, args, message):
    (tmp_path / "t.py").write_text(TRAIN)
    done = graphfix(*args, cwd=tmp_path, stdin=b"y\ny\ny\n")
    assert done.returncode == 2 and message in done.stderr.decode()
    assert (tmp_path / "t.py").read_text() == TRAIN


def test_help_documents_the_flag():
    done = graphfix("check", "--help", cwd=Path.cwd())
    assert "--interactive" in done.stdout.decode() and "y/n/a/d/q" in done.stdout.decode()
