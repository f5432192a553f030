"""What the server needs from the engine (the buffer checks, the settings, the rules' docs), in one
module that fixer.server.protocol imports only once ``initialize`` is answered: the engine, the
analysis and every rule take most of a start, and an editor shows nothing until that answer."""

from fixer.registry import by_code, documentation_url, explanation
from fixer.rule import Applicability
from fixer.server import memory
from fixer.server.buffer import Lines, changed_span, check, fix_all, fix_one
from fixer.server.settings import EditorSettings, editor_settings, options_for

__all__ = [
    "Applicability", "EditorSettings", "Lines", "by_code", "changed_span", "check", "documentation_url",
    "editor_settings", "explanation", "fix_all", "fix_one", "memory", "options_for",
]
