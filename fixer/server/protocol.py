"""The LSP side: diagnostics on open, on save and once typing settles, a quick fix per finding (safe or unsafe, said in
its title), the source action ``source.fixAll.graphfix``, hover with the rule's documentation, and
settings from initializationOptions and workspace/didChangeConfiguration."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Optional

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from fixer import __version__
from fixer.server.transport import ChunkedReader, GraphfixProtocol

if TYPE_CHECKING:
    from fixer.engine import Options
    from fixer.rule import Diagnostic
    from fixer.server.buffer import Checked, Lines

FIX_ALL = f"{lsp.CodeActionKind.SourceFixAll.value}.graphfix"
QUICK_FIX = lsp.CodeActionKind.QuickFix.value
NOT_CHECKED = ("cannot parse", "cannot decode", "binary file", "too large to analyse")
AT_LINE = re.compile(r"\(line (\d+)\)$")
SETTLE_SECONDS = 0.25  # a buffer is checked once typing pauses this long, not at every keystroke
LARGE = 1 << 20  # characters: a buffer whose analysis is worth giving back at once (memory.release)


def engine() -> ModuleType:
    """fixer.server.engine_side: the engine, the analysis and the rules. Imported once the client
    says ``initialized`` (or at the first message that needs it), never before ``initialize`` is
    answered: that import is most of a start (benchmarks/server_start.py)."""
    from fixer.server import engine_side

    return engine_side


class GraphfixServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "graphfix", __version__, text_document_sync_kind=lsp.TextDocumentSyncKind.Full, protocol_cls=GraphfixProtocol
        )
        self.raw_settings: Any = None  # initializationOptions, read when the engine is loaded
        self.editor: Any = None  # engine().EditorSettings once configured
        self.shown: set[str] = set()  # problems already shown: a bad setting is told once, not per keystroke
        self.cache: dict[str, Checked] = {}
        self.pending: dict[str, asyncio.TimerHandle] = {}  # uri -> its check once typing settles

    def configure(self, raw: object) -> None:
        self.editor, problems = engine().editor_settings(raw)
        self.shown.clear()
        self.tell(problems)

    def tell(self, problems: list[str], kind: lsp.MessageType = lsp.MessageType.Warning) -> None:
        for problem in problems:
            if problem not in self.shown:
                self.shown.add(problem)
                self.window_show_message(lsp.ShowMessageParams(kind, f"graphfix: {problem}"))

    def settled_settings(self) -> Any:
        """The editor's settings, read (with the engine loaded) at the first need."""
        if self.editor is None:
            self.configure(self.raw_settings)
        return self.editor

    def options(self, uri: str) -> Options:
        path = on_disk(uri)
        options, problems = engine().options_for(Path(path) if path else None, self.settled_settings())
        self.tell(problems)
        return options

    def path(self, uri: str) -> str:
        return on_disk(uri) or uri

    def checked(self, document: TextDocument, fresh: bool = False) -> Checked:
        """The findings of the buffer as it is now (cached until its text changes)."""
        cached = self.cache.get(document.uri)
        if fresh or cached is None or cached.text != document.source:
            cached = self.cache[document.uri] = engine().check(self.path(document.uri), document.source, self.options(document.uri))
            if len(document.source) > LARGE:
                engine().memory.release()
            crashes = [e for e in cached.errors if not e.startswith(NOT_CHECKED)]
            if crashes:  # a buffer not analysed is said on it (not_checked); a rule crash is a bug of ours
                self.window_log_message(lsp.LogMessageParams(lsp.MessageType.Error, "; ".join(crashes)))
        return cached

    def publish(self, uri: str, fresh: bool = False) -> None:
        document = self.workspace.get_text_document(uri)
        checked = self.checked(document, fresh)
        lines = engine().Lines(checked.text)
        diagnostics = [to_lsp(d, lines, document) for d in checked.diagnostics] + not_checked(checked)
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri, diagnostics, document.version))

    def publish_later(self, uri: str) -> None:
        """Check ``uri`` once no change came for SETTLE_SECONDS: a version superseded meanwhile is
        never analysed (1,000 quick changes were 1,000 analyses, and no request was read meanwhile)."""
        self.cancel(uri)
        self.pending[uri] = asyncio.get_running_loop().call_later(SETTLE_SECONDS, self._settled, uri)

    def cancel(self, uri: str) -> None:
        handle = self.pending.pop(uri, None)
        if handle is not None:
            handle.cancel()

    def _settled(self, uri: str) -> None:
        self.pending.pop(uri, None)
        if uri in self.workspace.text_documents:
            self.publish(uri)


server = GraphfixServer()


@server.feature(lsp.INITIALIZE)
def initialize(ls: GraphfixServer, params: lsp.InitializeParams) -> None:
    ls.raw_settings = params.initialization_options  # read at `initialized`: the answer goes first


@server.feature(lsp.INITIALIZED)
def initialized(ls: GraphfixServer, params: lsp.InitializedParams) -> None:
    ls.settled_settings()  # loads the engine while the editor opens its first buffer


@server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
def did_change_configuration(ls: GraphfixServer, params: lsp.DidChangeConfigurationParams) -> None:
    ls.configure(params.settings)
    for uri in list(ls.workspace.text_documents):
        ls.publish(uri, fresh=True)


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: GraphfixServer, params: lsp.DidOpenTextDocumentParams) -> None:
    ls.publish(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: GraphfixServer, params: lsp.DidChangeTextDocumentParams) -> None:
    ls.publish_later(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: GraphfixServer, params: lsp.DidSaveTextDocumentParams) -> None:
    # pyproject.toml or imported files may have changed: the saved file may be another one's helper
    for uri in [params.text_document.uri] + [u for u in ls.workspace.text_documents if u != params.text_document.uri]:
        ls.publish(uri, fresh=True)


@server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: GraphfixServer, params: lsp.DidCloseTextDocumentParams) -> None:
    ls.cancel(params.text_document.uri)
    closed = ls.cache.pop(params.text_document.uri, None)
    if closed is not None and len(closed.text) > LARGE:
        engine().memory.release()  # a full collection costs ~0.1 s: not for every small buffer
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(params.text_document.uri, []))


@server.feature(
    lsp.TEXT_DOCUMENT_CODE_ACTION,
    lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix, FIX_ALL]),
)
def code_action(ls: GraphfixServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    document = ls.workspace.get_text_document(params.text_document.uri)
    checked = ls.checked(document)
    lines = engine().Lines(checked.text)
    actions = []
    if _wanted(QUICK_FIX, params.context.only):
        start, end = _server_position(lines, document, params.range.start), _server_position(lines, document, params.range.end)
        for d in checked.diagnostics:
            fixed = engine().fix_one(checked.text, d) if _overlaps(d, start, end) else None
            if fixed is None:
                continue
            unsafe = d.fix.applicability is engine().Applicability.UNSAFE
            label = "unsafe fix: may change gradients" if unsafe else "safe fix"
            actions.append(lsp.CodeAction(
                f"{d.code}: {d.fix.title or 'apply the fix'} ({label})", kind=lsp.CodeActionKind.QuickFix,
                diagnostics=[to_lsp(d, lines, document)], is_preferred=not unsafe, edit=_edit(ls, document, lines, fixed),
            ))
    if _wanted(FIX_ALL, params.context.only):
        options = ls.options(document.uri)
        fixed = engine().fix_all(ls.path(document.uri), checked.text, options)
        if fixed is not None:
            title = "graphfix: fix all (unsafe fixes included)" if options.unsafe else "graphfix: fix all safe"
            actions.append(lsp.CodeAction(title, kind=FIX_ALL, edit=_edit(ls, document, lines, fixed)))
    return actions


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
def hover(ls: GraphfixServer, params: lsp.HoverParams) -> Optional[lsp.Hover]:
    document = ls.workspace.get_text_document(params.text_document.uri)
    checked = ls.checked(document)
    lines = engine().Lines(checked.text)
    at = _server_position(lines, document, params.position)
    hits = [d for d in checked.diagnostics if _overlaps(d, at, at)]
    if not hits:
        return None
    codes = dict.fromkeys(d.code for d in hits)
    text = "\n\n---\n\n".join(engine().explanation(engine().by_code(code)) for code in codes)
    return lsp.Hover(lsp.MarkupContent(lsp.MarkupKind.Markdown, text), _range(lines, document, hits[0]))


def on_disk(uri: str) -> Optional[str]:
    """The file a ``file:`` URI names; None for other schemes and for a path no file can have
    (``%00``), which is checked as a buffer not on disk instead of failing in the first ``stat``."""
    path = to_fs_path(uri) if uri.startswith("file:") else None
    return path if path and "\0" not in path else None


def not_checked(checked: Checked) -> list[lsp.Diagnostic]:
    """One information marker saying why the buffer was not analysed (a syntax error, its size, its
    encoding): no findings must never look like no bugs."""
    reasons = [e for e in checked.errors if e.startswith(NOT_CHECKED)]
    if not reasons:
        return []
    line = int(match.group(1)) - 1 if (match := AT_LINE.search(reasons[0])) else 0
    where = lsp.Range(lsp.Position(line, 0), lsp.Position(line + 1, 0))
    return [lsp.Diagnostic(where, f"graphfix did not check this file: {reasons[0]}", lsp.DiagnosticSeverity.Information, source="graphfix")]


def to_lsp(d: Diagnostic, lines: Lines, document: TextDocument) -> lsp.Diagnostic:
    url = engine().documentation_url(engine().by_code(d.code))
    severity = lsp.DiagnosticSeverity.Warning if d.code.startswith("GF3") else lsp.DiagnosticSeverity.Error
    return lsp.Diagnostic(
        _range(lines, document, d), d.message, severity, d.code,
        code_description=lsp.CodeDescription(url) if url else None, source="graphfix",
    )


def _range(lines: Lines, document: TextDocument, d: Diagnostic) -> lsp.Range:
    return lsp.Range(_client_position(lines, document, d.line - 1, d.col), _client_position(lines, document, d.end_line - 1, d.end_col))


def _client_position(lines: Lines, document: TextDocument, line: int, column: int) -> lsp.Position:
    """Characters -> the client's code units (UTF-16 unless it chose another)."""
    return lsp.Position(line, document.position_codec.client_num_units(lines.text_of(line)[:column]))


def _server_position(lines: Lines, document: TextDocument, position: lsp.Position) -> tuple[int, int]:
    text = lines.text_of(position.line).rstrip("\r\n")
    column = units = 0
    while column < len(text) and units < position.character:
        units += document.position_codec.client_num_units(text[column])
        column += 1
    return position.line, column


def _overlaps(d: Diagnostic, start: tuple[int, int], end: tuple[int, int]) -> bool:
    return (d.line - 1, d.col) <= end and start <= (d.end_line - 1, d.end_col)


def _wanted(kind: str, only: Optional[list]) -> bool:
    """LSP's ``only`` filter: a kind is wanted when it is, or is under, one asked for."""
    asked = [getattr(k, "value", k) for k in only or ()]  # lsprotocol gives known kinds as enums
    return not asked or any(kind == k or kind.startswith(f"{k}.") for k in asked)


def _edit(ls: GraphfixServer, document: TextDocument, lines: Lines, fixed: str) -> lsp.WorkspaceEdit:
    """One edit from the buffer's text to ``fixed``, for the version the client has: a client that
    changed the buffer since will refuse it instead of applying it to other text."""
    start, end, text = engine().changed_span("".join(lines.lines), fixed)
    begin, stop = lines.position(start), lines.position(end)
    edit = lsp.TextEdit(lsp.Range(_client_position(lines, document, *begin), _client_position(lines, document, *stop)), text)
    capabilities = ls.client_capabilities.workspace
    if capabilities and capabilities.workspace_edit and capabilities.workspace_edit.document_changes:
        identifier = lsp.OptionalVersionedTextDocumentIdentifier(document.uri, document.version)
        return lsp.WorkspaceEdit(document_changes=[lsp.TextDocumentEdit(identifier, [edit])])
    return lsp.WorkspaceEdit(changes={document.uri: [edit]})


def serve() -> None:
    server.start_io(stdin=ChunkedReader(sys.stdin.buffer))
