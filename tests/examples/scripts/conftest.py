"""Tests of the repository's examples/ folder.

The scripts there import their scenarios and runner from the sibling package ``scenarios``
(``python examples/000_support.py`` puts examples/ on ``sys.path``); these tests import it the
same way. Appended, not prepended, so it can shadow nothing else the suite imports.
"""

from __future__ import annotations

import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.append(str(EXAMPLES))
