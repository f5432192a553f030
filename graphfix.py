"""The ``graphfix`` import name: the Python API of the runtime sanitizer.

    import graphfix
    with graphfix.watch():
        train()

The code lives in the ``fixer`` package; this module only re-exports its public API. Run as a
program (``python -m graphfix PATH``, as people write ``python -m ruff``) it is the command line,
exactly as ``graphfix`` and ``python -m fixer``."""

from fixer import __version__
from fixer.runtime import watch

__all__ = ["__version__", "watch"]

if __name__ == "__main__":  # the CLI (typer) is imported only when run as a program
    from fixer.launch import main

    main()
