"""Reports for CI services: SARIF 2.1.0 (GitHub code scanning), JUnit XML, GitLab Code Quality."""

from __future__ import annotations

import hashlib
import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Sequence
from urllib.parse import quote

from fixer import __version__
from fixer.diff import display_path
from fixer.rule import Diagnostic

Item = tuple[str, Diagnostic]  # (path, diagnostic)
Error = tuple[str, str]  # (path, message) of a file that could not be checked

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
# By family (the hundreds digit): 1xx crashes, 2xx training that silently goes wrong, 3xx wasted
# memory, 0xx graphfix's own comments.
SARIF_LEVEL = {"1": "error", "2": "error", "3": "warning", "0": "note"}
GITLAB_SEVERITY = {"1": "critical", "2": "major", "3": "minor", "0": "info"}
# Characters XML 1.0 allows nowhere, not even escaped (ESC, BEL, lone surrogates of undecodable
# file names): written as Python escapes, so the report parses and still says what was there.
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _family(code: str) -> str:
    return code[2]


def section(documentation: str, heading: str) -> str:
    """The text under ``## heading`` of a rule's docstring, up to the next heading."""
    _, found, rest = documentation.partition(f"## {heading}\n")
    return rest.split("\n## ", 1)[0].strip() if found else ""


def _rule_descriptor(rule) -> dict:
    descriptor = {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": section(rule.documentation, "What it does") or rule.summary},
        "help": {"text": rule.documentation, "markdown": rule.documentation},
        "defaultConfiguration": {"level": SARIF_LEVEL[_family(rule.code)]},
        "properties": {"fix_safety": rule.fix_safety},
    }
    return {key: value for key, value in descriptor.items() if value is not None}  # no page on disk: no link


def _artifact(path: str) -> dict:
    return {"uri": quote(display_path(path)), "uriBaseId": "%SRCROOT%"}


def _region(line: int, column: int, end_line: int, end_column: int) -> dict:
    """SARIF columns are 1-based; the end column is the one after the region."""
    return {"startLine": line, "startColumn": column, "endLine": end_line, "endColumn": end_column}


def _sarif_result(path: str, d: Diagnostic, index: dict[str, int]) -> dict:
    result = {
        "ruleId": d.code,
        "level": SARIF_LEVEL[_family(d.code)],
        "message": {"text": d.message},
        "locations": [
            {"physicalLocation": {"artifactLocation": _artifact(path), "region": _region(d.line, d.col + 1, d.end_line, d.end_col + 1)}}
        ],
    }
    if d.code in index:
        result["ruleIndex"] = index[d.code]
    if d.fix is not None:
        safety = d.fix.applicability.value
        replacements = [
            {"deletedRegion": _region(*e.location, *e.end_location), "insertedContent": {"text": e.text}} for e in d.fix.edits
        ]
        result["fixes"] = [
            {
                "description": {"text": f"{d.fix.title or 'Fix'} ({safety} fix)"},
                "artifactChanges": [{"artifactLocation": _artifact(path), "replacements": replacements}],
            }
        ]
        result["properties"] = {"fix_applicability": safety}
    return result


def sarif(items: Sequence[Item], errors: Sequence[Error] = ()) -> str:
    from fixer.registry import all_rules  # SARIF lists every rule: only that format imports them

    rules = all_rules()
    index = {rule.code: number for number, rule in enumerate(rules)}
    notifications = [
        {"level": "error", "message": {"text": f"{display_path(path)}: {message}"},
         "locations": [{"physicalLocation": {"artifactLocation": _artifact(path)}}]}
        for path, message in errors
    ]
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "graphfix",
                        "version": __version__,
                        "rules": [_rule_descriptor(rule) for rule in rules],
                    }
                },
                "invocations": [{"executionSuccessful": not errors, "toolExecutionNotifications": notifications}],
                "originalUriBaseIds": {"%SRCROOT%": {"uri": Path(os.getcwd()).as_uri() + "/"}},
                "columnKind": "unicodeCodePoints",
                "results": [_sarif_result(path, d, index) for path, d in items],
            }
        ],
    }
    return json.dumps(log, indent=2)


def junit(items: Sequence[Item], errors: Sequence[Error] = ()) -> str:
    """One test suite per file, one failing test case per finding, one erroring case per file
    that could not be checked; a clean run is one passing case."""
    by_file: dict[str, list] = {}
    for path, d in items:
        by_file.setdefault(display_path(path), []).append(d)
    for path, message in errors:
        by_file.setdefault(display_path(path), []).append(message)
    root = ET.Element("testsuites", name="graphfix", tests=str(len(items) + len(errors) or 1),
                      failures=str(len(items)), errors=str(len(errors)))
    for name, entries in by_file.items():
        found = [e for e in entries if isinstance(e, Diagnostic)]
        suite = ET.SubElement(root, "testsuite", name=name, tests=str(len(entries)),
                              failures=str(len(found)), errors=str(len(entries) - len(found)))
        for entry in entries:
            if isinstance(entry, Diagnostic):
                case = ET.SubElement(suite, "testcase", classname=name, name=f"{entry.code} {entry.name}",
                                     file=name, line=str(entry.line))
                failure = ET.SubElement(case, "failure", message=entry.message, type=entry.code)
                failure.text = f"{name}:{entry.line}:{entry.col + 1}: {entry.code} {entry.message}\nsee `graphfix explain {entry.code}`"
            else:
                case = ET.SubElement(suite, "testcase", classname=name, name="could not be checked", file=name)
                ET.SubElement(case, "error", message=entry).text = f"{name}: error: {entry}"
    if not by_file:
        suite = ET.SubElement(root, "testsuite", name="graphfix", tests="1", failures="0", errors="0")
        ET.SubElement(suite, "testcase", classname="graphfix", name="no findings")
    ET.indent(root)
    document = ET.tostring(root, encoding="unicode")  # control characters only occur in names and messages
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + NOT_XML.sub(lambda m: ascii(m.group())[1:-1], document) + "\n"


def gitlab(items: Sequence[Item]) -> str:
    """GitLab Code Quality: the fingerprint hashes path, code and message (not the line, so moving
    code keeps it), numbered when one file has several identical findings."""
    seen: dict[tuple[str, str, str], int] = {}
    issues = []
    for path, d in items:
        name = display_path(path)
        key = (name, d.code, d.message)
        seen[key] = seen.get(key, -1) + 1
        digest = hashlib.sha256("\0".join((*key, str(seen[key]))).encode("utf-8")).hexdigest()
        issues.append({
            "description": f"{d.code} {d.message}",
            "check_name": d.code,
            "fingerprint": digest,
            "severity": GITLAB_SEVERITY[_family(d.code)],
            "location": {"path": name, "lines": {"begin": d.line, "end": d.end_line}},
            "content": {"body": f"{d.name}: see `graphfix explain {d.code}`"},  # Code Climate's field for more
        })
    return json.dumps(issues, indent=2)
