"""The language server answers ``initialize`` before it imports the engine: an editor shows
nothing until that answer, and the engine, the analysis and the rules are most of a start (issue
24: 1.0-1.6 s before; benchmarks/server_start.py times it). Not a timed test: it checks which
modules the server had imported when it answered, from ``python -X importtime``'s record."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.lsp_stdio import stdio_server

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("fixer.cli", "fixer.engine", "fixer.registry", "fixer.analysis", "codemods", "fixer.server.buffer",
         "fixer.server.settings", "fixer.server.memory", "typer", "click", "ctypes", "asyncio")
NEVER = ("pygls", "lsprotocol", "cattrs", "attrs")  # the server speaks LSP with the standard library
BUGGY = (ROOT / "fixtures/loss_accumulated_with_graph/plain_loop.before.py").read_text().replace("  # expect: GF301", "")


class Imports:
    """The modules a process has imported so far, read from its -X importtime lines on stderr."""

    def __init__(self, stream) -> None:
        self.names: list[str] = []
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in stream:
            if line.startswith(b"import time:") and b"|" in line:
                self.names.append(line.rsplit(b"|", 1)[1].strip().decode())

    def heavy(self) -> list[str]:
        return sorted({n for n in list(self.names) if n.startswith(HEAVY)})


def test_initialize_is_answered_before_the_engine_is_imported(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-X", "importtime", "-m", "fixer", "server"]
    with stdio_server(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE) as server:
        imports = Imports(server.process.stderr)
        server.send(id=1, method="initialize", params={"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {},
                                                       "initializationOptions": {"select": ["GF3"]}})
        answer = server.until(lambda m: m.get("id") == 1)
        assert answer["result"]["capabilities"]["codeActionProvider"] and answer["result"]["capabilities"]["hoverProvider"]
        time.sleep(0.5)  # anything the answer set off would be imported meanwhile
        assert "fixer.server.protocol" in imports.names
        assert imports.heavy() == [], "imported before the client's `initialized`"
        # then the engine comes, and the server works as before
        path = tmp_path / "train.py"
        path.write_text(BUGGY)
        server.send(method="initialized", params={})
        server.send(method="textDocument/didOpen", params={"textDocument": {
            "uri": path.as_uri(), "languageId": "python", "version": 1, "text": BUGGY}})
        published = server.until(lambda m: m.get("method") == "textDocument/publishDiagnostics")
        assert [d["code"] for d in published["params"]["diagnostics"]] == ["GF301"]
        assert "fixer.engine" in imports.heavy() and "typer" not in imports.heavy()  # the CLI is never imported
        assert [n for n in imports.names if n.split(".")[0] in NEVER] == []
        assert server.stop() == 0


def test_the_server_needs_no_lsp_library(tmp_path):
    """pygls and lsprotocol made most of a start (0.27 s of 0.29 s CPU): the server now speaks LSP
    with the standard library, and works where they cannot be imported."""
    for name in NEVER:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"raise ModuleNotFoundError('No module named {name!r}', name={name!r})\n")
    path = tmp_path / "train.py"
    path.write_text(BUGGY)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    with stdio_server([sys.executable, "-m", "fixer", "server"], cwd=tmp_path, env=env, stderr=subprocess.DEVNULL) as server:
        server.send(id=1, method="initialize", params={"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}})
        assert server.until(lambda m: m.get("id") == 1)["result"]["serverInfo"]["name"] == "graphfix"
        server.send(method="initialized", params={})
        server.send(method="textDocument/didOpen", params={"textDocument": {
            "uri": path.as_uri(), "languageId": "python", "version": 1, "text": BUGGY}})
        published = server.until(lambda m: m.get("method") == "textDocument/publishDiagnostics")
        assert [d["code"] for d in published["params"]["diagnostics"]] == ["GF301"]
        assert server.stop() == 0
