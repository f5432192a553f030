"""``graphfix run --fix``: from a finding's facts, the edits an expert would try, in the
expert's order (fixer.runtime.repair.expert), each tried by running the program again
(fixer.runtime.repair.trial); the first that the re-run proves is kept."""
