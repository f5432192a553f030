"""`graphfix server` in a real editor: headless neovim attaches the server to a buffer holding a
bug, waits for its diagnostic, requests the code action, applies it as neovim applies any LSP edit,
and writes the buffer. CI installs Debian's neovim (.ci/run)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NVIM = shutil.which("nvim")
pytestmark = [
    pytest.mark.skipif(NVIM is None, reason="neovim is not installed (CI installs Debian's neovim)"),
]

CASE = ROOT / "fixtures/loss_accumulated_with_graph/plain_loop"
BUGGY = CASE.with_name(CASE.name + ".before.py").read_text().replace("  # expect: GF301", "")
FIXED = CASE.with_name(CASE.name + ".after.py").read_text()

# Works on neovim 0.7 (Debian 12: no vim.lsp.start yet) and newer.
SCRIPT = r"""
local report = {}
local function finish()
  vim.fn.writefile({vim.fn.json_encode(report)}, os.getenv('GF_REPORT'))
  vim.cmd('qall!')
end
local ok, err = pcall(function()
  local buf = vim.api.nvim_get_current_buf()
  local config = {
    name = 'graphfix', cmd = {os.getenv('GF_PYTHON'), '-m', 'fixer', 'server'},
    root_dir = vim.fn.expand('%:p:h'), cmd_env = {PYTHONPATH = os.getenv('GF_ROOT')},
  }
  local id
  if vim.lsp.start then id = vim.lsp.start(config) else
    id = vim.lsp.start_client(config)
    vim.lsp.buf_attach_client(buf, id)
  end
  if not vim.wait(20000, function() return #vim.diagnostic.get(buf) > 0 end, 20) then
    error('no diagnostics from the server')
  end
  local found = vim.diagnostic.get(buf)[1]
  report.diagnostic = {code = found.code, line = found.lnum, col = found.col, source = found.source}
  vim.api.nvim_win_set_cursor(0, {found.lnum + 1, found.col})
  local params = vim.lsp.util.make_range_params()
  params.context = {diagnostics = vim.lsp.diagnostic.get_line_diagnostics(buf), only = {os.getenv('GF_KIND')}}
  local replies = vim.lsp.buf_request_sync(buf, 'textDocument/codeAction', params, 10000)
  local action = replies[id].result[1]
  report.title = action.title
  vim.lsp.util.apply_workspace_edit(action.edit, vim.lsp.get_client_by_id(id).offset_encoding or 'utf-16')
  vim.cmd('write')
end)
if not ok then report.error = tostring(err) end
finish()
"""


@pytest.mark.parametrize(
    "kind,title",
    [("quickfix", "GF301: "), ("source.fixAll.graphfix", "graphfix: fix all safe")],
)
def test_neovim_applies_the_servers_code_action(tmp_path, kind, title):
    path, script, report = tmp_path / "train.py", tmp_path / "attach.lua", tmp_path / "report.json"
    path.write_text(BUGGY)
    script.write_text(SCRIPT)
    env = {**os.environ, "GF_PYTHON": sys.executable, "GF_ROOT": str(ROOT), "GF_REPORT": str(report), "GF_KIND": kind}
    subprocess.run(
        [NVIM, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", f"luafile {script}", str(path)],
        env=env, cwd=tmp_path, timeout=60, stdin=subprocess.DEVNULL, capture_output=True, check=False,
    )
    result = json.loads(report.read_text())
    assert "error" not in result, result
    assert result["diagnostic"] == {"code": "GF301", "line": 14, "col": 4, "source": "graphfix"}
    assert result["title"].startswith(title)
    assert path.read_text() == FIXED
