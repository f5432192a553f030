"""The editor recipes of docs/editors/, as the README shows them, work as written:

- neovim (docs/editors/neovim.lua, for 0.7 and newer): headless neovim loads the file as its
  init.lua, opens a buggy file, gets the server's diagnostic and applies the recipe's fix-all
  command; the file is then what `graphfix --fix` writes. `graphfix` is found on PATH, as the
  recipe expects (a shim that runs this checkout).
- VS Code (docs/editors/vscode-settings.json, for the "Generic LSP Client (v2)" extension,
  zsol.vscode-glspc): VS Code cannot run here, so the test checks the settings against the
  extension's own settings schema (its package.json, version 0.2.0) and then does what the
  extension does with them: spawn `command` with `commandArguments`, send `initialize` with
  `initializationOptions`, open a document of a `languageId` listed, and ask for the
  `source.fixAll.graphfix` action that `editor.codeActionsOnSave` asks for on save."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lsp_stdio import stdio_server

ROOT = Path(__file__).resolve().parent.parent
NEOVIM = ROOT / "docs/editors/neovim.lua"
VSCODE = ROOT / "docs/editors/vscode-settings.json"
CASE = ROOT / "fixtures/loss_accumulated_with_graph/plain_loop"
BUGGY = CASE.with_name(CASE.name + ".before.py").read_text().replace("  # expect: GF301", "")
FIXED = CASE.with_name(CASE.name + ".after.py").read_text()
NVIM = shutil.which("nvim")

# zsol.vscode-glspc 0.2.0, package.json "contributes.configuration.properties": name -> JSON type
GLSPC = {
    "glspc.server.command": str, "glspc.server.commandArguments": list, "glspc.server.languageId": list,
    "glspc.server.environmentVariables": dict, "glspc.server.initializationOptions": dict, "glspc.trace.server": str,
}
VSCODE_OWN = {"editor.codeActionsOnSave": dict}  # VS Code's own setting

CHECK = r"""
local report = {}
local ok, err = pcall(function()
  local buf = vim.api.nvim_get_current_buf()
  if not vim.wait(30000, function() return #vim.diagnostic.get(buf) > 0 end, 20) then
    error('no diagnostics (filetype ' .. vim.bo.filetype .. ')')
  end
  local found = vim.diagnostic.get(buf)[1]
  report.diagnostic = {code = found.code, line = found.lnum, source = found.source}
  local before = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n')
  vim.cmd(os.getenv('GF_FIX_ALL'))
  if not vim.wait(20000, function() return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n') ~= before end, 20) then
    error('the fix-all command changed nothing')
  end
  vim.cmd('write')
  report.clients = #vim.lsp.buf_get_clients(buf)
end)
if not ok then report.error = tostring(err) end
vim.fn.writefile({vim.fn.json_encode(report)}, os.getenv('GF_REPORT'))
vim.cmd('qall!')
"""


def shim(folder: Path) -> Path:
    """A `graphfix` command on PATH that runs this checkout (the recipes call `graphfix server`)."""
    folder.mkdir()
    command = folder / "graphfix"
    command.write_text(f"#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m fixer \"$@\"\n")
    command.chmod(0o755)
    return folder


def test_the_readme_shows_the_recipes_as_the_files_are():
    readme = (ROOT / "README.md").read_text()
    assert f"```lua\n{NEOVIM.read_text()}```" in readme
    assert f"```json\n{VSCODE.read_text()}```" in readme


@pytest.mark.skipif(NVIM is None, reason="neovim is not installed (apt-get install neovim)")
def test_the_neovim_recipe_works_as_written(tmp_path):
    version = subprocess.run([NVIM, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    path, check, report = tmp_path / "train.py", tmp_path / "check.lua", tmp_path / "report.json"
    path.write_text(BUGGY)
    check.write_text(CHECK)
    fix_all = next(line for line in NEOVIM.read_text().splitlines() if line.startswith("-- fix all safe: :"))
    env = {**os.environ, "PATH": f"{shim(tmp_path / 'bin')}{os.pathsep}{os.environ['PATH']}",
           "GF_REPORT": str(report), "GF_FIX_ALL": fix_all.split(": :", 1)[1]}
    env.pop("PYTHONPATH", None)
    subprocess.run([NVIM, "--headless", "-u", str(NEOVIM), "-i", "NONE", "-n", "-c", f"luafile {check}", str(path)],
                   env=env, cwd=tmp_path, timeout=90, stdin=subprocess.DEVNULL, capture_output=True, check=False)
    result = json.loads(report.read_text())
    assert "error" not in result, (version, result)
    assert result == {"diagnostic": {"code": "GF301", "line": 14, "source": "graphfix"}, "clients": 1}, version
    assert path.read_text() == FIXED


def test_the_vscode_settings_are_what_the_extension_takes():
    settings = json.loads(VSCODE.read_text())  # settings.json as written: strict JSON, no comments
    for key, value in settings.items():
        expected = GLSPC.get(key) or VSCODE_OWN.get(key)
        assert expected is not None, f"{key}: neither the extension's setting nor VS Code's"
        assert isinstance(value, expected), key
    assert settings["glspc.server.languageId"] and all(isinstance(v, str) for v in settings["glspc.server.languageId"])
    assert all(isinstance(v, str) for v in settings["glspc.server.commandArguments"])
    assert settings["editor.codeActionsOnSave"] == {"source.fixAll.graphfix": "explicit"}


def apply(text: str, edits: list[dict]) -> str:
    lines = text.splitlines(keepends=True)
    offset = lambda p: sum(len(line) for line in lines[:p["line"]]) + p["character"]  # ASCII: UTF-16 units = characters
    for edit in sorted(edits, key=lambda e: offset(e["range"]["start"]), reverse=True):
        text = text[:offset(edit["range"]["start"])] + edit["newText"] + text[offset(edit["range"]["end"]):]
    return text


def test_the_vscode_settings_drive_the_server_as_the_extension_does(tmp_path):
    settings = json.loads(VSCODE.read_text())
    env = {**os.environ, "PATH": f"{shim(tmp_path / 'bin')}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    command = shutil.which(settings["glspc.server.command"], path=env["PATH"])
    path = tmp_path / "train.py"
    path.write_text(BUGGY)
    uri = path.as_uri()
    command = [command, *settings["glspc.server.commandArguments"]]
    with stdio_server(command, cwd=tmp_path, env=env, stderr=subprocess.DEVNULL) as server:
        server.send(id=1, method="initialize", params={"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {},
                                                       "initializationOptions": settings["glspc.server.initializationOptions"]})
        server.until(lambda m: m.get("id") == 1)
        server.send(method="initialized", params={})
        server.send(method="textDocument/didOpen", params={"textDocument": {
            "uri": uri, "languageId": settings["glspc.server.languageId"][0], "version": 1, "text": BUGGY}})
        published = server.until(lambda m: m.get("method") == "textDocument/publishDiagnostics")
        assert [d["code"] for d in published["params"]["diagnostics"]] == ["GF301"]
        on_save = list(settings["editor.codeActionsOnSave"])
        server.send(id=2, method="textDocument/codeAction", params={
            "textDocument": {"uri": uri}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
            "context": {"diagnostics": [], "only": on_save}})
        actions = server.until(lambda m: m.get("id") == 2)["result"]
        assert [a["kind"] for a in actions] == on_save
        assert apply(BUGGY, actions[0]["edit"]["changes"][uri]) == FIXED
        assert server.stop() == 0
