"""The edit builders shared by the static rules (``codemods/``) and ``graphfix run --fix``
(fixer.runtime.repair): each turns a place in one parsed file (``fixer.context.FileContext``)
into exact text edits (``fixer.rule.Edit``). They decide nothing about graphs: the caller has
proven, or will prove by a re-run, that the edit is the right one."""
