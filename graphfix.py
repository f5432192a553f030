"""The ``graphfix`` import name: the Python API of the runtime sanitizer.

    import graphfix
    with graphfix.watch():
        train()

The code lives in the ``fixer`` package; this module only re-exports its public API."""

from fixer import __version__
from fixer.runtime import watch

__all__ = ["__version__", "watch"]
