"""Lets `pytest examples/` import the example's handler module (billing_handlers)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
