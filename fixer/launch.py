"""The ``graphfix`` command's first step (the console script, ``python -m graphfix`` and
``python -m fixer``): ``graphfix server``, which editors start with every window and wait for, is
dispatched before the command line (typer, click, the engine and every rule) is imported; every
other command goes to fixer.cli."""

from __future__ import annotations

import gc
import sys
from typing import List, Optional

SERVER_FLAGS = {"--stdio"}  # what the server command takes; anything else (--help) goes to the CLI


def main(argv: Optional[List[str]] = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["server"] and set(args[1:]) <= SERVER_FLAGS:
        from fixer.server.protocol import serve

        raise SystemExit(serve())
    from fixer.cli import main as cli_main

    try:
        cli_main(args)
    finally:
        # The process ends here: the interpreter's last collections would scan every object a run
        # keeps (the imported modules' trees, the memos), 1.3 s CPU after a --jobs 1 run over
        # torch's tree; frozen, their memory goes back with the process unscanned.
        gc.freeze()
