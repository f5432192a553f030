"""No output points at a web address that does not exist (graphfix has no hosted documentation):
local reports (JSON, `rules`, the language server) link the rules page on disk where it is there,
give no link where it is not (an installed wheel); CI reports carry `graphfix explain GFxxx`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

from tests.test_discovery import BUGGY, ROOT, graphfix, write


def test_no_report_names_a_web_address(tmp_path: Path) -> None:
    write(tmp_path, {"train.py": BUGGY})
    for fmt in ("json", "json-lines", "sarif", "gitlab", "junit", "github", "text"):
        out = graphfix("--output-format", fmt, "train.py", cwd=tmp_path).stdout.decode()
        assert "GF301" in out and "github.com/graphfix" not in out, fmt
        assert "https://" not in out.replace("https://json.schemastore.org", "").replace("https://docs.oasis-open.org", ""), fmt
    sarif = json.loads(graphfix("--output-format", "sarif", "train.py", cwd=tmp_path).stdout)
    driver = sarif["runs"][0]["tool"]["driver"]
    assert "informationUri" not in driver and all("helpUri" not in rule for rule in driver["rules"])
    assert all(rule["help"]["markdown"].startswith("## What it does") for rule in driver["rules"])  # the docs travel inside
    gitlab = json.loads(graphfix("--output-format", "gitlab", "train.py", cwd=tmp_path).stdout)
    assert gitlab[0]["content"]["body"] == "loss-accumulated-with-graph: see `graphfix explain GF301`"


def test_json_links_the_rules_page_on_disk(tmp_path: Path) -> None:
    write(tmp_path, {"train.py": BUGGY})
    url = json.loads(graphfix("--output-format", "json", "train.py", cwd=tmp_path).stdout)[0]["url"]
    parsed = urlparse(url)
    assert parsed.scheme == "file" and parsed.fragment == "gf301"
    page = Path(unquote(parsed.path))
    assert page == ROOT / "docs" / "rules.md" and "\n## GF301\n" in page.read_text()


def test_without_the_rules_page_there_is_no_link(tmp_path: Path) -> None:
    """As an installed wheel: the packages without docs/ beside them."""
    for name in ("fixer", "codemods"):
        shutil.copytree(ROOT / name, tmp_path / "site" / name, ignore=shutil.ignore_patterns("__pycache__"))
    write(tmp_path, {"train.py": BUGGY})
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    done = subprocess.run([sys.executable, "-m", "fixer", "--output-format", "json", "train.py"], cwd=tmp_path, env=env,
                          capture_output=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)[0]["url"] is None
