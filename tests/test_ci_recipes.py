"""The CI recipes in docs/ci/ (and, verbatim, in the README) are valid YAML of the right shape,
and the graphfix commands they run give the expected exit codes and reports on a sample tree."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_discovery import BUGGY, CLEAN, ROOT, write

try:
    import yaml
except ImportError:  # the structural checks below still run
    yaml = None

RECIPES = ROOT / "docs" / "ci"
GITHUB = (RECIPES / "github-actions.yml").read_text()
GITLAB = (RECIPES / "gitlab-ci.yml").read_text()
SCHEMA = ROOT / "tests" / "data" / "sarif-schema-2.1.0.json"


def commands(text: str) -> list[str]:
    """The graphfix command lines of a recipe, in order (`run: graphfix ...`, `- graphfix ...`)."""
    return [m.group(1) for m in re.finditer(r"^\s*(?:run:|-)\s+(graphfix\s.*)$", text, re.M)]


def run(command: str, cwd: Path) -> subprocess.CompletedProcess:
    argv = shlex.split(command, comments=True)
    assert argv[0] == "graphfix"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "fixer", *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_readme_shows_the_recipes_as_the_files_are() -> None:
    readme = (ROOT / "README.md").read_text()
    assert f"```yaml\n{GITHUB}```" in readme and f"```yaml\n{GITLAB}```" in readme


@pytest.mark.skipif(yaml is None, reason="no YAML library: the structural checks cover the text")
def test_recipes_are_valid_yaml_of_the_right_shape() -> None:
    workflow = yaml.safe_load(GITHUB)
    assert workflow["permissions"]["security-events"] == "write"
    assert set(workflow[True if True in workflow else "on"]) == {"push", "pull_request"}  # YAML 1.1 reads `on` as true
    steps = workflow["jobs"]["graphfix"]["steps"]
    uses = [s.get("uses", "").split("@")[0] for s in steps]
    assert uses[:2] == ["actions/checkout", "actions/setup-python"] and "github/codeql-action/upload-sarif" in uses
    upload = steps[uses.index("github/codeql-action/upload-sarif")]
    assert upload["if"] == "always()" and f"--output-file {upload['with']['sarif_file']} " in GITHUB
    job = yaml.safe_load(GITLAB)["graphfix"]
    assert job["artifacts"]["when"] == "always"
    assert f"--output-file {job['artifacts']['reports']['codequality']} " in " ".join(job["script"])


def test_structure_without_a_yaml_library() -> None:
    assert re.search(r"^permissions:\n(  .*\n)*  security-events: write", GITHUB, re.M)
    assert re.search(r"uses: github/codeql-action/upload-sarif@v\d+\n\s+if: always\(\)\n\s+with:\n\s+sarif_file: graphfix.sarif", GITHUB)
    assert re.search(r"artifacts:\n\s+when: always\n\s+reports:\n\s+codequality: gl-code-quality.json", GITLAB)
    assert all("\t" not in text for text in (GITHUB, GITLAB))


def test_github_workflow_commands_on_a_sample_tree(tmp_path: Path) -> None:
    sarif_step, annotations = commands(GITHUB)
    write(tmp_path, {"train.py": BUGGY, "pkg/ok.py": CLEAN})
    done = run(sarif_step, tmp_path)
    assert done.returncode == 0 and done.stdout == "", done.stderr  # --exit-zero: the upload still runs
    log = json.loads((tmp_path / "graphfix.sarif").read_text())
    results = log["runs"][0]["results"]
    assert [(r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]) for r in results] == [("GF301", "train.py")]
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft4Validator(json.loads(SCHEMA.read_text())).validate(log)
    done = run(annotations, tmp_path)
    assert done.returncode == 1  # the job fails on a finding
    assert done.stdout.startswith("::error title=graphfix (GF301),file=train.py,line=")
    (tmp_path / "train.py").write_text(CLEAN)
    assert run(annotations, tmp_path).returncode == 0


def test_gitlab_job_commands_on_a_sample_tree(tmp_path: Path) -> None:
    (check,) = commands(GITLAB)
    write(tmp_path, {"train.py": BUGGY, "pkg/ok.py": CLEAN})
    done = run(check, tmp_path)
    assert done.returncode == 1 and done.stdout == "", done.stderr
    issues = json.loads((tmp_path / "gl-code-quality.json").read_text())
    assert [(i["check_name"], i["location"]["path"], i["severity"]) for i in issues] == [("GF301", "train.py", "minor")]
    (tmp_path / "train.py").write_text(CLEAN)
    assert run(check, tmp_path).returncode == 0
    assert json.loads((tmp_path / "gl-code-quality.json").read_text()) == []
