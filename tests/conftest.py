import os
import sys
from pathlib import Path

# tests import each other as the `tests` package from the repository root
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# The suite tests the analysis: every graphfix run it starts analyses (tests/test_cache.py, which
# tests the cache, clears this for its own runs).
os.environ["GRAPHFIX_NO_CACHE"] = "1"
