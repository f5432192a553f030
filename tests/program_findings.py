"""What every rule reports on a program file (fixing with unsafe fixes), and the program run on its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fixer.engine import Options, process_source
from fixer.registry import all_rules


def findings(path: Path) -> list:
    return text_findings(path.read_bytes(), str(path))


def text_findings(text: bytes, path: str = "t.py") -> list:
    """Every rule's diagnostics on a program's text (fixing with unsafe fixes); no analysis error."""
    result = process_source(path, text, Options(rules=tuple(all_rules()), fix=True, unsafe=True))
    assert not result.errors, result.errors
    return result.diagnostics


def run_program(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120, env={"OMP_NUM_THREADS": "1", "PATH": ""})
