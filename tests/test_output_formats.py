"""--output-format sarif / junit / gitlab / json-lines, and the documentation URL of every finding."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from fixer import ci_formats
from fixer import rule as rule_module
from fixer.engine import Options, process_source
from fixer.output import record
from fixer.registry import all_rules
from tests.test_cli import BUGGY, FIXED, ROOT, graphfix

SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"
RULES_PAGE = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(BUGGY)
    (tmp_path / "broken.py").write_text("def f(:\n    loss.backward()\n")
    return tmp_path


def _apply(text: str, replacements: list[dict]) -> str:
    """Apply SARIF replacements (1-based lines and columns, end column exclusive)."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    spans = []
    for r in replacements:
        region = r["deletedRegion"]
        start = starts[region["startLine"] - 1] + region["startColumn"] - 1
        end = starts[region["endLine"] - 1] + region["endColumn"] - 1
        spans.append((start, end, r["insertedContent"]["text"]))
    for start, end, new in sorted(spans, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def test_sarif_is_valid_and_carries_rules_locations_fixes_and_errors(project):
    jsonschema = pytest.importorskip("jsonschema", reason="validating SARIF needs jsonschema (the test extra)")
    out = graphfix("--output-format", "sarif", "train.py", "broken.py", cwd=project)
    assert out.returncode == 123  # broken.py cannot be parsed
    log = json.loads(out.stdout)
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator(schema).validate(log)
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [r.code for r in all_rules()]
    gf301 = next(r for r in rules if r["id"] == "GF301")
    assert gf301["name"] == "loss-accumulated-with-graph"
    assert gf301["shortDescription"]["text"] and gf301["fullDescription"]["text"] in gf301["help"]["markdown"]
    assert "## Fix safety" in gf301["help"]["markdown"] and "## What it does" not in gf301["fullDescription"]["text"]
    [result] = run["results"]
    assert rules[result["ruleIndex"]]["id"] == result["ruleId"] == "GF301"
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "train.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"]["startLine"] == 15 and location["region"]["startColumn"] == 5
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == project.resolve().as_uri() + "/"
    [fix] = result["fixes"]
    assert _apply(BUGGY, fix["artifactChanges"][0]["replacements"]) == FIXED  # the fix, exactly
    assert run["invocations"][0]["executionSuccessful"] is False
    [note] = run["invocations"][0]["toolExecutionNotifications"]
    assert note["message"]["text"].startswith("broken.py: cannot parse")


def test_sarif_of_a_clean_run_is_valid(tmp_path):
    jsonschema = pytest.importorskip("jsonschema", reason="validating SARIF needs jsonschema (the test extra)")
    (tmp_path / "ok.py").write_text("x = 1\n")
    out = graphfix("--output-format", "sarif", ".", cwd=tmp_path)
    log = json.loads(out.stdout)
    jsonschema.Draft4Validator(json.loads(SCHEMA.read_text(encoding="utf-8"))).validate(log)
    assert (out.returncode, log["runs"][0]["results"], log["runs"][0]["invocations"][0]["executionSuccessful"]) == (0, [], True)


def test_every_documentation_url_points_at_a_rule_on_the_rules_page(project):
    records = json.loads(graphfix("--output-format", "json", "train.py", cwd=project).stdout)
    listed = json.loads(graphfix("rules", "--output-format", "json", cwd=project).stdout)
    urls = [r["url"] for r in records] + [r["url"] for r in listed]
    assert len(urls) == 1 + len(all_rules())
    anchors = {f"#{code.lower()}" for code in re.findall(r"^## (GF\d{3})$", RULES_PAGE, re.M)}
    for url in urls:
        assert url[url.index("#"):] in anchors and url.split("#")[0] == (ROOT / "docs/rules.md").as_uri()  # not a site that is not there


def test_without_the_rules_page_on_disk_no_output_links_anywhere(monkeypatch):
    """An installed wheel has no docs/ and graphfix no hosted documentation: no link, a valid report."""
    jsonschema = pytest.importorskip("jsonschema", reason="validating SARIF needs jsonschema (the test extra)")
    monkeypatch.setattr(rule_module, "_PAGE_URI", None)
    [d] = process_source("train.py", BUGGY.encode(), Options(rules=tuple(all_rules()))).diagnostics
    log = json.loads(ci_formats.sarif([("train.py", d)]))
    jsonschema.Draft4Validator(json.loads(SCHEMA.read_text(encoding="utf-8"))).validate(log)
    assert "Uri" not in json.dumps(log).replace("uriBaseId", "").replace("originalUriBaseIds", "")
    assert record("train.py", d)["url"] is None and "http" not in ci_formats.junit([("train.py", d)]) + ci_formats.gitlab([("train.py", d)])


def test_json_lines_is_one_json_record_per_finding(project):
    (project / "more.py").write_text(BUGGY)
    lines = graphfix("--output-format", "json-lines", "train.py", "more.py", cwd=project).stdout.decode().splitlines()
    array = json.loads(graphfix("--output-format", "json", "train.py", "more.py", cwd=project).stdout)
    assert [json.loads(line) for line in lines] == array and len(array) == 2


def test_junit_has_a_failure_per_finding_and_an_error_per_unreadable_file(project):
    out = graphfix("--output-format", "junit", "train.py", "broken.py", cwd=project)
    root = ET.fromstring(out.stdout)
    assert (root.tag, root.get("tests"), root.get("failures"), root.get("errors")) == ("testsuites", "2", "1", "1")
    failure = root.find("testsuite[@name='train.py']/testcase/failure")
    assert failure.get("type") == "GF301" and "train.py:15:5: GF301" in failure.text and "graphfix explain GF301" in failure.text
    assert root.find("testsuite[@name='broken.py']/testcase/error").get("message").startswith("cannot parse")
    (project / "broken.py").unlink()
    (project / "train.py").write_text(FIXED)
    clean = ET.fromstring(graphfix("--output-format", "junit", ".", cwd=project).stdout)
    assert (clean.get("tests"), clean.get("failures"), len(clean.findall(".//testcase"))) == ("1", "0", 1)


def test_gitlab_fingerprints_are_stable_unique_and_survive_moved_code(project):
    (project / "broken.py").unlink()
    twice = BUGGY.replace("running_loss += loss\n", "running_loss += loss\n    running_loss += loss\n")
    (project / "train.py").write_text(twice)
    first = json.loads(graphfix("--output-format", "gitlab", ".", cwd=project).stdout)
    assert json.loads(graphfix("--output-format", "gitlab", ".", cwd=project).stdout) == first
    assert len(first) == 2 and len({issue["fingerprint"] for issue in first}) == 2
    issue = first[0]
    assert (issue["check_name"], issue["severity"], issue["location"]) == (
        "GF301", "minor", {"path": "train.py", "lines": {"begin": 15, "end": 15}}
    )
    assert issue["description"].startswith("GF301 ")
    (project / "train.py").write_text("# a comment moves the code down\n" + twice)
    moved = json.loads(graphfix("--output-format", "gitlab", ".", cwd=project).stdout)
    assert [i["fingerprint"] for i in moved] == [i["fingerprint"] for i in first]
    assert moved[0]["location"]["lines"]["begin"] == 16


HOSTILE = "<&\"']]>\x1b[31m\x07\x08\x7f\x0c\x0b\u2028%0A\U0001f600"
FORMATS = ("text", "json", "json-lines", "sarif", "junit", "gitlab", "github")


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    """A GF102 finding whose message quotes a line holding every character a format must survive,
    in a file whose name holds them too (less the line breaks)."""
    source = (ROOT / "examples/seed002_reused_subgraph.py").read_text()
    source = source.replace("projected = transform @ offset", f'projected = transform @ offset * len("""{HOSTILE}""")')
    assert HOSTILE in source
    (tmp_path / f"e{HOSTILE.replace(chr(0x2028), '')}.py").write_text(source, encoding="utf-8")
    return tmp_path


def strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return [s for item in items for s in strings(item)]


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_parses_with_hostile_names_and_messages(hostile, fmt):
    out = graphfix("--output-format", fmt, ".", cwd=hostile)
    assert out.returncode == 1
    text = out.stdout.decode("utf-8")
    if fmt in ("json", "sarif", "gitlab"):
        assert any(HOSTILE in value for value in strings(json.loads(text)))  # JSON escapes; nothing is lost
    elif fmt == "json-lines":
        [record] = [json.loads(line) for line in text.split("\n")[:-1]]
        assert HOSTILE in record["message"]
    elif fmt == "junit":
        failure = ET.fromstring(text).find(".//failure")  # ESC, BEL...: not well-formed XML before
        assert failure.get("type") == "GF102" and "\\x1b[31m\\x07" in failure.get("message")
        assert "<&\"']]>" in failure.get("message")
    elif fmt == "github":
        [line] = text.split("\n")[:-1]  # a runner splits at LF only
        assert line.startswith("::error ") and "%250A" in line  # the message's own "%0A" is no line break
    else:  # text: a terminal gets no control sequence from the checked file
        [line] = text.split("\n")[:-1]
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", line + out.stderr.decode("utf-8"))
        assert "\\x1b[31m\\x07" in line and ": GF102 " in line
