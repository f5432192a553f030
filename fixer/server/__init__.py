"""`graphfix server`: a language server on stdin/stdout (pygls, the optional `server` extra).

buffer.py runs the engine on an editor's text, settings.py decides the options per file,
protocol.py speaks LSP. The server never writes files and never runs the code it checks."""

from __future__ import annotations

import sys

NEEDS = ("pygls", "lsprotocol", "cattrs", "attrs")


def main() -> int:
    try:
        from fixer.server.protocol import serve
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in NEEDS:
            raise
        print(f"graphfix: error: the language server needs {exc.name}: pip install 'graphfix[server]'", file=sys.stderr)
        return 2
    serve()
    return 0
