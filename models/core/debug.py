"""VRAMPLAN_DEBUG: tracebacks (and the libraries' own log lines) instead of one line an error.

It is on when set to anything but an empty value, `0`, `false`, `no` or `off` (any case): any
non-empty text was on, so `VRAMPLAN_DEBUG=0`, meant to turn it off, printed tracebacks."""

from __future__ import annotations

import os

OFF = ("", "0", "false", "no", "off")


def debug_enabled() -> bool:
    return os.environ.get("VRAMPLAN_DEBUG", "").strip().lower() not in OFF
