"""Text from the user's files shown as it is: control characters escaped, so a name holding
ESC [2J cannot clear the terminal. Standard library only: cli.py's error line uses it too."""

from __future__ import annotations

import re

# C0 and C1 control characters but newline and tab.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def literal(text: str) -> str:
    """Text exactly as it is, its control characters escaped (\\x1b -> '\\\\x1b')."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
