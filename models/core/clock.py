"""Today's date, for the age of catalogue prices. VRAMPLAN_TODAY=YYYY-MM-DD fixes it (the tests
pin it, so that an answer does not change with the day it is computed on)."""

from __future__ import annotations

import os
import re
from datetime import date, timedelta

from vramplan.models.core.errors import VramplanError

PRICE_DATE_GRACE = timedelta(days=1)  # a price read "tomorrow" in another time zone is not in the future
LAST_TODAY = date(9999, 1, 1)  # the latest VRAMPLAN_TODAY is the day before: dates computed from it stay on the calendar


def today() -> date:
    pinned = os.environ.get("VRAMPLAN_TODAY")
    if not pinned:
        return date.today()
    # The form first: date.fromisoformat also took 20261231 and the week date 2026-W50-1, and
    # called 2027-02-29 (the right form, no such day) not a date YYYY-MM-DD.
    if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", pinned):
        raise VramplanError("VRAMPLAN_TODAY", pinned, "must be a date YYYY-MM-DD")
    try:
        day = date.fromisoformat(pinned)
    except ValueError:
        raise VramplanError("VRAMPLAN_TODAY", pinned, "is not a day of the calendar") from None
    if day >= LAST_TODAY:  # the catalogue checks add a day of grace to today: 9999-12-31 overflowed
        raise VramplanError("VRAMPLAN_TODAY", pinned, f"must be a date before {LAST_TODAY.isoformat()}")
    return day


def date_of(when: str) -> date:
    """A catalogue date: YYYY-MM-DD, or YYYY-MM (its first day); ValueError if not on the calendar."""
    return date.fromisoformat(when if len(when) > 7 else when + "-01")


def days_since(when: str, on: date) -> int:
    """Days from a catalogue date to `on`."""
    return (on - date_of(when)).days


def refuse_today_before(newest: date, prices: str) -> None:
    """A today before the newest of prices vramplan ships is the clock's error or VRAMPLAN_TODAY's:
    the packaged file's first row was named as the bad cell (`price_date '2026-11-30' is after today`)."""
    now = today()
    if newest <= now + PRICE_DATE_GRACE:
        return
    pinned = os.environ.get("VRAMPLAN_TODAY")
    if pinned:
        raise VramplanError("VRAMPLAN_TODAY", pinned, f"is before the newest price of {prices} (read "
                                                      f"{newest.isoformat()}): pin a date on or after it")
    raise VramplanError("today", now.isoformat(), f"the machine's clock is before the newest price of {prices} (read "
                                                  f"{newest.isoformat()}): set the clock, or VRAMPLAN_TODAY=YYYY-MM-DD")
