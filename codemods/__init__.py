"""graphfix rules: one module per bug pattern, found by existing here."""
