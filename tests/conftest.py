import sys
from pathlib import Path

# tests import each other as the `tests` package from the repository root
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
