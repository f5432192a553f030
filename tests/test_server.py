"""`graphfix server` driven by a real LSP client (pytest-lsp) over stdio: diagnostics, quick fixes
applied and compared with the fixtures' .after.py, fix-all, hover, settings, pyproject.toml per
workspace folder."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest_lsp = pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed (pip install '.[test]')")
from lsprotocol import types as lsp  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient  # noqa: E402

pytestmark = pytest.mark.asyncio(loop_scope="module")  # one server for the module: each test opens its own files
ROOT = Path(__file__).resolve().parent.parent
EXPECT = re.compile(r"  # expect: GF\d+")
GF301 = ROOT / "fixtures/loss_accumulated_with_graph/plain_loop"
GF201 = ROOT / "fixtures/zero_grad_between_backward_and_step/accumulation_zeroed_every_batch"
CONFIG = ClientServerConfig(
    server_command=[sys.executable, "-m", "fixer", "server"], server_env={**os.environ, "PYTHONPATH": str(ROOT)}
)
CAPABILITIES = lsp.ClientCapabilities(
    workspace=lsp.WorkspaceClientCapabilities(workspace_edit=lsp.WorkspaceEditClientCapabilities(document_changes=True))
)


def before(case: Path) -> str:
    return EXPECT.sub("", case.with_name(case.name + ".before.py").read_text())


def after(case: Path) -> str:
    return case.with_name(case.name + ".after.py").read_text()


@pytest_lsp.fixture(config=CONFIG, scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    root = tmp_path_factory.mktemp("workspace")
    await lsp_client.initialize_session(lsp.InitializeParams(capabilities=CAPABILITIES, root_uri=root.as_uri()))
    yield
    await lsp_client.shutdown_session()


@pytest.fixture(autouse=True)
def default_settings(request):
    """A test that changes the editor's settings on the shared server gives them back."""
    yield
    if "client" in request.fixturenames:
        request.getfixturevalue("client").workspace_did_change_configuration(lsp.DidChangeConfigurationParams({}))


async def publish(client: LanguageClient, send, *uris: str) -> None:
    """Send, then wait until diagnostics for every one of ``uris`` have come (the server publishes
    for every open document after a settings change, in an order of its own)."""
    for uri in uris:
        client.diagnostics.pop(uri, None)
    send()
    for _ in range(1000):
        if all(uri in client.diagnostics for uri in uris):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"no diagnostics published for {uris}")


async def open_file(client: LanguageClient, path: Path, text: str) -> list[lsp.Diagnostic]:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    item = lsp.TextDocumentItem(path.as_uri(), "python", 1, text)
    await publish(client, lambda: client.text_document_did_open(lsp.DidOpenTextDocumentParams(item)), item.uri)
    return list(client.diagnostics[path.as_uri()])


async def actions(client: LanguageClient, uri: str, diagnostic: lsp.Diagnostic, only=None) -> list[lsp.CodeAction]:
    context = lsp.CodeActionContext([diagnostic], only=only)
    params = lsp.CodeActionParams(lsp.TextDocumentIdentifier(uri), diagnostic.range, context)
    return list(await client.text_document_code_action_async(params) or [])


def applied(text: str, edit: lsp.WorkspaceEdit) -> str:
    """Apply a workspace edit as an editor does: LSP lines (\\n, \\r\\n, \\r), UTF-16 columns."""
    (change,) = edit.document_changes
    for text_edit in sorted(change.edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        start, end = offset(text, text_edit.range.start), offset(text, text_edit.range.end)
        text = text[:start] + text_edit.new_text + text[end:]
    return text


def offset(text: str, position: lsp.Position) -> int:
    lines = re.split(r"(?<=\r\n)|(?<=\r)(?!\n)|(?<=\n)", text)
    start = sum(len(line) for line in lines[: position.line])
    line = lines[position.line] if position.line < len(lines) else ""
    units = 0
    for index, char in enumerate(line):
        if units >= position.character:
            return start + index
        units += 2 if ord(char) > 0xFFFF else 1
    return start + len(line)


async def test_quick_fix_and_fix_all_give_the_fixtures_after(client: LanguageClient, tmp_path):
    path = tmp_path / "train.py"
    text = before(GF301)
    (diagnostic,) = await open_file(client, path, text)
    assert (diagnostic.code, diagnostic.source, diagnostic.severity) == ("GF301", "graphfix", lsp.DiagnosticSeverity.Warning)
    assert (diagnostic.range.start.line, diagnostic.range.start.character) == (14, 4)  # `running_loss += loss`
    assert diagnostic.code_description.href.endswith("docs/rules.md#gf301")
    (quick_fix, fix_all) = await actions(client, path.as_uri(), diagnostic)
    assert quick_fix.kind == lsp.CodeActionKind.QuickFix and quick_fix.is_preferred
    assert quick_fix.title.startswith("GF301: ") and quick_fix.title.endswith("(safe fix)")
    assert (fix_all.kind, fix_all.title) == ("source.fixAll.graphfix", "graphfix: fix all safe")
    assert applied(text, quick_fix.edit) == applied(text, fix_all.edit) == after(GF301)
    assert path.read_text() == text  # the server never writes


async def test_an_unsafe_fix_is_offered_as_unsafe_only_and_fix_all_takes_it_when_enabled(client: LanguageClient, tmp_path):
    path = tmp_path / "train.py"
    text = before(GF201)
    (diagnostic,) = await open_file(client, path, text)
    assert diagnostic.severity == lsp.DiagnosticSeverity.Error
    (quick_fix,) = await actions(client, path.as_uri(), diagnostic)  # no safe fix: no fix-all
    assert quick_fix.title.endswith("(unsafe fix: may change gradients)") and not quick_fix.is_preferred
    assert applied(text, quick_fix.edit) == after(GF201)
    settings = lsp.DidChangeConfigurationParams({"graphfix": {"unsafeFixes": True}})
    await publish(client, lambda: client.workspace_did_change_configuration(settings), path.as_uri())
    (fix_all,) = await actions(client, path.as_uri(), diagnostic, only=["source.fixAll"])
    assert fix_all.title == "graphfix: fix all (unsafe fixes included)"
    assert applied(text, fix_all.edit) == after(GF201)


async def test_hover_shows_the_rules_documentation_on_its_range_only(client: LanguageClient, tmp_path):
    path = tmp_path / "train.py"
    (diagnostic,) = await open_file(client, path, before(GF301))
    document = lsp.TextDocumentIdentifier(path.as_uri())
    hover = await client.text_document_hover_async(lsp.HoverParams(document, diagnostic.range.start))
    assert hover.contents.kind == lsp.MarkupKind.Markdown
    assert hover.contents.value.startswith("# loss-accumulated-with-graph (GF301)") and "## Fix safety" in hover.contents.value
    assert hover.range == diagnostic.range
    assert await client.text_document_hover_async(lsp.HoverParams(document, lsp.Position(0, 0))) is None


async def test_changes_are_checked_and_positions_count_as_the_editor_does(client: LanguageClient, tmp_path):
    path = tmp_path / "train.py"
    uri = path.as_uri()
    await open_file(client, path, "x = 1\n")
    # U+2028 is no line break for Python or LSP (str.splitlines breaks there); 😀 is 2 UTF-16 units
    text = before(GF301).replace("running_loss = 0.0\n", 'running_loss = 0.0\nlabel = "a\u2028b"\n').replace(
        "    running_loss += loss", '    t = "😀"; running_loss += loss'
    )
    change = lsp.DidChangeTextDocumentParams(
        lsp.VersionedTextDocumentIdentifier(2, uri), [lsp.TextDocumentContentChangeWholeDocument(text)]
    )
    await publish(client, lambda: client.text_document_did_change(change), uri)
    (diagnostic,) = client.diagnostics[uri]
    assert (diagnostic.range.start.line, diagnostic.range.start.character) == (15, 14)  # UTF-16: 4 + 5 + 2 (😀) + 3
    (quick_fix, _) = await actions(client, uri, diagnostic)
    assert applied(text, quick_fix.edit) == text.replace("running_loss += loss", "running_loss += loss.item()")
    broken = lsp.DidChangeTextDocumentParams(
        lsp.VersionedTextDocumentIdentifier(3, uri), [lsp.TextDocumentContentChangeWholeDocument(text + "loss.backward(\n")]
    )
    await publish(client, lambda: client.text_document_did_change(broken), uri)
    (note,) = client.diagnostics[uri]  # mid-typing: no findings, and one note saying why, no error
    assert (note.severity, note.code, note.range.start.line) == (lsp.DiagnosticSeverity.Information, None, text.count("\n"))
    assert note.message.startswith("graphfix did not check this file: cannot parse: ") and not client.log_messages


@pytest_lsp.fixture(config=CONFIG, scope="module")
async def configured(lsp_client: LanguageClient, tmp_path_factory):
    root = tmp_path_factory.mktemp("configured")
    options = {"settings": {"ignore": ["GF301"], "select": ["GF3", "GF999"]}}
    await lsp_client.initialize_session(
        lsp.InitializeParams(capabilities=CAPABILITIES, root_uri=root.as_uri(), initialization_options=options)
    )
    yield
    await lsp_client.shutdown_session()


async def test_editor_settings_apply_and_can_change(configured: LanguageClient, tmp_path):
    path = tmp_path / "train.py"
    assert await open_file(configured, path, before(GF301)) == []
    assert any("GF999" in m.message for m in configured.messages)  # an unknown selector is told, not fatal
    settings = lsp.DidChangeConfigurationParams({"graphfix": {"ignore": []}})
    await publish(configured, lambda: configured.workspace_did_change_configuration(settings), path.as_uri())
    assert [d.code for d in configured.diagnostics[path.as_uri()]] == ["GF301"]


async def test_each_workspace_folders_pyproject_is_honoured(client: LanguageClient, tmp_path):
    (tmp_path / "quiet").mkdir()
    (tmp_path / "quiet/pyproject.toml").write_text('[tool.graphfix]\nignore = ["GF301"]\n')
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken/pyproject.toml").write_text("[tool.graphfix]\nselect = 3\n")
    assert [d.code for d in await open_file(client, tmp_path / "loud/train.py", before(GF301))] == ["GF301"]
    assert await open_file(client, tmp_path / "quiet/train.py", before(GF301)) == []
    assert [d.code for d in await open_file(client, tmp_path / "broken/train.py", before(GF301))] == ["GF301"]
    assert any("select must be a list" in m.message for m in client.messages)
    # the editor's own setting wins over the folder's, as a command-line flag does
    settings = lsp.DidChangeConfigurationParams({"graphfix": {"ignore": ["GF2"]}})
    uris = [(tmp_path / folder / "train.py").as_uri() for folder in ("loud", "quiet", "broken")]
    await publish(client, lambda: client.workspace_did_change_configuration(settings), *uris)
    assert [d.code for d in client.diagnostics[(tmp_path / "quiet/train.py").as_uri()]] == ["GF301"]


async def test_saving_a_helper_module_updates_its_importers(client: LanguageClient, tmp_path):
    """The server is a long-lived process: what it read of an imported module must not outlive a
    change of that module (the step function moves the loop's finding in and out)."""
    from tests.test_project_model import _step_program

    steps = tmp_path / "steps.py"
    steps.write_text(_step_program("carried")[0])
    loop = "import torch\nfrom steps import train_step, sequence, targets\n" + _step_program("carried")[1]
    train = tmp_path / "train.py"
    assert [d.code for d in await open_file(client, train, loop)] == ["GF101"]
    cut = _step_program("cut-inside-step")[0]
    item = lsp.TextDocumentItem(steps.as_uri(), "python", 1, steps.read_text())
    await publish(client, lambda: client.text_document_did_open(lsp.DidOpenTextDocumentParams(item)), item.uri)
    steps.write_text(cut)
    save = lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(steps.as_uri()))
    await publish(client, lambda: client.text_document_did_save(save), steps.as_uri(), train.as_uri())
    assert list(client.diagnostics[train.as_uri()]) == []


async def test_a_config_that_cannot_be_read_is_told_and_the_defaults_apply(client: LanguageClient, tmp_path):
    (tmp_path / "pyproject.toml").write_bytes(b'[project]\nauthors = [{name = "Jos\xe9"}]\n\n[tool.graphfix]\nselect = ["GF3"]\n')
    assert [d.code for d in await open_file(client, tmp_path / "train.py", before(GF301))] == ["GF301"]
    assert any("not UTF-8" in m.message and "using the defaults" in m.message for m in client.messages)  # config.load names it


async def test_a_buffer_starting_with_a_bom_is_checked_and_fixed(client: LanguageClient, tmp_path):
    path = tmp_path / "train.py"
    text = "\ufeff" + before(GF301)
    (diagnostic,) = await open_file(client, path, text)
    assert (diagnostic.code, diagnostic.range.start.line, diagnostic.range.start.character) == ("GF301", 14, 4)
    (quick_fix, fix_all) = await actions(client, path.as_uri(), diagnostic)
    assert applied(text, quick_fix.edit) == applied(text, fix_all.edit) == "\ufeff" + after(GF301)


async def test_a_uri_no_file_can_have_is_checked_as_a_buffer(client: LanguageClient, tmp_path):
    uri = (tmp_path / "train.py").as_uri().replace("train", "tr%00ain")
    item = lsp.TextDocumentItem(uri, "python", 1, before(GF301))
    await publish(client, lambda: client.text_document_did_open(lsp.DidOpenTextDocumentParams(item)), uri)
    assert [d.code for d in client.diagnostics[uri]] == ["GF301"]


async def test_a_buffer_over_max_file_size_says_it_was_not_checked(client: LanguageClient, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.graphfix]\nmax-file-size = "100B"\n')
    (note,) = await open_file(client, tmp_path / "train.py", before(GF301))
    assert note.severity == lsp.DiagnosticSeverity.Information and "too large to analyse" in note.message


def cli_fix(text: str, *flags: str) -> str:
    """``graphfix --fix -`` on ``text``, as an editor's format-on-save recipe runs it."""
    out = subprocess.run(
        [sys.executable, "-m", "fixer", "--fix", "-", "--stdin-filename", "train.py", "--silent", *flags],
        input=text.encode("utf-8"), capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120,
    )
    return out.stdout.decode("utf-8")


@pytest.mark.parametrize("variant", ["plain", "crlf", "bom", "no final newline"])
async def test_fix_all_equals_the_cli_fix_on_the_same_text(client: LanguageClient, tmp_path, variant):
    text = {
        "plain": before(GF301), "crlf": before(GF301).replace("\n", "\r\n"),
        "bom": "\ufeff" + before(GF301), "no final newline": before(GF301).rstrip("\n"),
    }[variant]
    path = tmp_path / "train.py"
    (diagnostic,) = await open_file(client, path, text)
    (fix_all,) = await actions(client, path.as_uri(), diagnostic, only=["source.fixAll"])
    assert applied(text, fix_all.edit) == cli_fix(text) != text
