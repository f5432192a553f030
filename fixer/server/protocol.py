"""The LSP side: diagnostics on open, on save and once typing settles, a quick fix per finding (safe or unsafe, said in
its title), the source action ``source.fixAll.graphfix``, hover with the rule's documentation, and
settings from initializationOptions and workspace/didChangeConfiguration.

Messages are plain dicts (the few LSP structures graphfix sends are written here); the session,
the framing and the text model are the standard library's. ``initialize`` is answered before the
engine, the analysis and the rules are imported (fixer.server.engine_side, most of a start): they
load when the client says ``initialized``, or at the first message that needs them."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Optional

from fixer import __version__
from fixer.server.documents import (
    Codec, Document, changed, negotiated, on_disk, position, read_file, required, uri_of,
)
from fixer.server.jsonrpc import Writer
from fixer.server.session import Session

if TYPE_CHECKING:
    from fixer.engine import Options
    from fixer.rule import Diagnostic
    from fixer.server.buffer import Checked, Lines

QUICK_FIX = "quickfix"
FIX_ALL = "source.fixAll.graphfix"
FULL_SYNC = 1  # TextDocumentSyncKind.Full: every change sends the whole buffer
ERROR, WARNING, INFORMATION = 1, 2, 3  # DiagnosticSeverity, and MessageType for these three
NOT_CHECKED = ("cannot parse", "cannot decode", "binary file", "too large to analyse")
AT_LINE = re.compile(r"\(line (\d+)\)$")
SETTLE_SECONDS = 0.25  # a buffer is checked once typing pauses this long, not at every keystroke
LARGE = 1 << 20  # characters: a buffer whose analysis is worth giving back at once (memory.release)
ENGINE = "fixer.server.engine_side"


def engine() -> ModuleType:
    """fixer.server.engine_side: the engine, the analysis and the rules, imported at the first need
    (benchmarks/server_start.py times the start without it)."""
    return importlib.import_module(ENGINE)


class GraphfixServer(Session):
    def __init__(self, writer: Writer) -> None:
        super().__init__(writer)
        self.requests = {"initialize": self.initialize, "textDocument/codeAction": self.code_action,
                         "textDocument/hover": self.hover}
        self.notifications = {
            "initialized": self.on_initialized, "workspace/didChangeConfiguration": self.did_change_configuration,
            "textDocument/didOpen": self.did_open, "textDocument/didChange": self.did_change,
            "textDocument/didSave": self.did_save, "textDocument/didClose": self.did_close,
        }
        self.documents: dict[str, Document] = {}
        self.codec = Codec()
        self.document_changes = False  # the client takes versioned edits (workspace.workspaceEdit.documentChanges)
        self.raw_settings: Any = None  # initializationOptions, read when the engine is loaded
        self.editor: Any = None  # engine().EditorSettings once configured
        self.shown: set[str] = set()  # problems already shown: a bad setting is told once, not per keystroke
        self.cache: dict[str, Checked] = {}

    # lifecycle and settings

    def initialize(self, params: Any) -> dict:
        capabilities = params.get("capabilities") if isinstance(params, dict) else None
        self.codec = Codec(negotiated(capabilities))
        workspace = capabilities.get("workspace") if isinstance(capabilities, dict) else None
        edits = workspace.get("workspaceEdit") if isinstance(workspace, dict) else None
        self.document_changes = isinstance(edits, dict) and edits.get("documentChanges") is True
        self.raw_settings = params.get("initializationOptions") if isinstance(params, dict) else None  # read at `initialized`
        return {
            "capabilities": {
                "positionEncoding": self.codec.encoding,
                "textDocumentSync": {"openClose": True, "change": FULL_SYNC, "save": True},
                "hoverProvider": True,
                "codeActionProvider": {"codeActionKinds": [QUICK_FIX, FIX_ALL]},
            },
            "serverInfo": {"name": "graphfix", "version": __version__},
        }

    def on_initialized(self, params: Any) -> None:
        self.settled_settings()  # loads the engine while the editor opens its first buffer

    def configure(self, raw: object) -> None:
        self.editor, problems = engine().editor_settings(raw)
        self.shown.clear()
        self.tell(problems)

    def tell(self, problems: list[str], kind: int = WARNING) -> None:
        for problem in problems:
            if problem not in self.shown:
                self.shown.add(problem)
                self.rpc.notify("window/showMessage", {"type": kind, "message": f"graphfix: {problem}"})

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

    def did_change_configuration(self, params: Any) -> None:
        self.configure(params.get("settings") if isinstance(params, dict) else None)
        for uri in list(self.documents):
            self.publish(uri, fresh=True)

    # documents

    def did_open(self, params: Any) -> None:
        item = required(params, "textDocument", dict)
        uri, text = required(item, "uri", str), required(item, "text", str)
        self.documents[uri] = Document(uri, item.get("version"), text)
        self.publish(uri)

    def did_change(self, params: Any) -> None:
        document = self.documents.get(uri_of(params))
        if document is None:
            return
        for change in required(params, "contentChanges", list):
            document.text = changed(document.text, change, self.codec)
        document.version = params["textDocument"].get("version")
        self.publish_later(document.uri)

    def did_save(self, params: Any) -> None:
        # pyproject.toml or imported files may have changed: the saved file may be another one's helper
        saved = uri_of(params)
        for uri in [saved] * (saved in self.documents) + [u for u in self.documents if u != saved]:
            self.publish(uri, fresh=True)

    def did_close(self, params: Any) -> None:
        uri = uri_of(params)
        self.cancel(uri)
        self.documents.pop(uri, None)
        closed = self.cache.pop(uri, None)
        if closed is not None and len(closed.text) > LARGE:
            engine().memory.release()  # a full collection costs ~0.1 s: not for every small buffer
        self.rpc.notify("textDocument/publishDiagnostics", {"uri": uri, "diagnostics": []})

    def document(self, uri: str) -> Optional[Document]:
        """The open document, or the file of one the client asks about without opening it."""
        if uri in self.documents:
            return self.documents[uri]
        text = read_file(uri)
        return None if text is None else Document(uri, None, text)

    def checked(self, document: Document, fresh: bool = False) -> Checked:
        """The findings of the buffer as it is now (cached until its text changes)."""
        cached = self.cache.get(document.uri)
        if fresh or cached is None or cached.text != document.text:
            cached = engine().check(on_disk(document.uri) or document.uri, document.text, self.options(document.uri))
            if document.uri in self.documents:
                self.cache[document.uri] = cached
            if len(document.text) > LARGE:
                engine().memory.release()
            crashes = [e for e in cached.errors if not e.startswith(NOT_CHECKED)]
            if crashes:  # a buffer not analysed is said on it (not_checked); a rule crash is a bug of ours
                self.rpc.notify("window/logMessage", {"type": ERROR, "message": "; ".join(crashes)})
        return cached

    def publish(self, uri: str, fresh: bool = False) -> None:
        document = self.documents[uri]
        checked = self.checked(document, fresh)
        lines = engine().Lines(checked.text)
        diagnostics = [self.to_lsp(d, lines) for d in checked.diagnostics] + not_checked(checked)
        published = {"uri": uri, "diagnostics": diagnostics}
        if document.version is not None:
            published["version"] = document.version
        self.rpc.notify("textDocument/publishDiagnostics", published)

    def publish_later(self, uri: str) -> None:
        """Check ``uri`` once no change came for SETTLE_SECONDS: a version superseded meanwhile is
        never analysed (1,000 quick changes were 1,000 analyses, and no request was read meanwhile)."""
        self.later(uri, SETTLE_SECONDS, lambda: self.publish(uri) if uri in self.documents else None)

    # requests

    def code_action(self, params: Any) -> list[dict]:
        uri = uri_of(params)
        where, context = required(params, "range", dict), required(params, "context", dict)
        start, end, only = position(where, "start"), position(where, "end"), context.get("only")
        document = self.document(uri)
        if document is None:
            return []
        checked = self.checked(document)
        lines = engine().Lines(checked.text)
        actions = []
        if _wanted(QUICK_FIX, only):
            start, end = self.server_position(lines, start), self.server_position(lines, end)
            for d in checked.diagnostics:
                fixed = engine().fix_one(checked.text, d) if _overlaps(d, start, end) else None
                if fixed is None:
                    continue
                unsafe = d.fix.applicability is engine().Applicability.UNSAFE
                label = "unsafe fix: may change gradients" if unsafe else "safe fix"
                actions.append({
                    "title": f"{d.code}: {d.fix.title or 'apply the fix'} ({label})", "kind": QUICK_FIX,
                    "diagnostics": [self.to_lsp(d, lines)], "isPreferred": not unsafe, "edit": self.edit(document, lines, fixed),
                })
        if _wanted(FIX_ALL, only):
            options = self.options(uri)
            fixed = engine().fix_all(on_disk(uri) or uri, checked.text, options)
            if fixed is not None:
                title = "graphfix: fix all (unsafe fixes included)" if options.unsafe else "graphfix: fix all safe"
                actions.append({"title": title, "kind": FIX_ALL, "edit": self.edit(document, lines, fixed)})
        return actions

    def hover(self, params: Any) -> Optional[dict]:
        uri, at = uri_of(params), position(params)
        document = self.document(uri)
        if document is None:
            return None
        checked = self.checked(document)
        lines = engine().Lines(checked.text)
        at = self.server_position(lines, at)
        hits = [d for d in checked.diagnostics if _overlaps(d, at, at)]
        if not hits:
            return None
        codes = dict.fromkeys(d.code for d in hits)
        text = "\n\n---\n\n".join(engine().explanation(engine().by_code(code)) for code in codes)
        return {"contents": {"kind": "markdown", "value": text}, "range": self.range(lines, hits[0])}

    # positions and structures

    def to_lsp(self, d: Diagnostic, lines: Lines) -> dict:
        url = engine().documentation_url(engine().by_code(d.code))
        diagnostic = {"range": self.range(lines, d), "message": d.message,
                      "severity": WARNING if d.code.startswith("GF3") else ERROR, "code": d.code, "source": "graphfix"}
        if url:
            diagnostic["codeDescription"] = {"href": url}
        return diagnostic

    def range(self, lines: Lines, d: Diagnostic) -> dict:
        return {"start": self.client_position(lines, d.line - 1, d.col), "end": self.client_position(lines, d.end_line - 1, d.end_col)}

    def client_position(self, lines: Lines, line: int, column: int) -> dict:
        """Characters -> the client's code units (UTF-16 unless it chose another)."""
        return {"line": line, "character": self.codec.units(lines.text_of(line)[:column])}

    def server_position(self, lines: Lines, at: tuple[int, int]) -> tuple[int, int]:
        return at[0], self.codec.column(lines.text_of(at[0]), at[1])

    def edit(self, document: Document, lines: Lines, fixed: str) -> dict:
        """One edit from the buffer's text to ``fixed``, for the version the client has: a client that
        changed the buffer since will refuse it instead of applying it to other text."""
        start, end, text = engine().changed_span("".join(lines.lines), fixed)
        where = {"start": self.client_position(lines, *lines.position(start)), "end": self.client_position(lines, *lines.position(end))}
        edit = {"range": where, "newText": text}
        if self.document_changes:
            identifier = {"uri": document.uri, "version": document.version}
            return {"documentChanges": [{"textDocument": identifier, "edits": [edit]}]}
        return {"changes": {document.uri: [edit]}}


def not_checked(checked: Checked) -> list[dict]:
    """One information marker saying why the buffer was not analysed (a syntax error, its size, its
    encoding): no findings must never look like no bugs."""
    reasons = [e for e in checked.errors if e.startswith(NOT_CHECKED)]
    if not reasons:
        return []
    line = int(match.group(1)) - 1 if (match := AT_LINE.search(reasons[0])) else 0
    where = {"start": {"line": line, "character": 0}, "end": {"line": line + 1, "character": 0}}
    return [{"range": where, "message": f"graphfix did not check this file: {reasons[0]}", "severity": INFORMATION, "source": "graphfix"}]


def _overlaps(d: Diagnostic, start: tuple[int, int], end: tuple[int, int]) -> bool:
    return (d.line - 1, d.col) <= end and start <= (d.end_line - 1, d.end_col)


def _wanted(kind: str, only: Any) -> bool:
    """LSP's ``only`` filter: a kind is wanted when it is, or is under, one asked for."""
    asked = [k for k in only or () if isinstance(k, str)] if isinstance(only, list) else []
    return not asked or any(kind == k or kind.startswith(f"{k}.") for k in asked)


def serve() -> int:
    """LSP on stdin/stdout until ``exit`` or the end of input; the exit status."""
    stdin = open(sys.stdin.fileno(), "rb", buffering=0, closefd=False)  # unbuffered: no lock held at exit by the reader
    return GraphfixServer(Writer(sys.stdout.buffer)).run(stdin)
