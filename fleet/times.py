"""Timestamps of the fleet's sheets and of --start, all on one clock: UTC.

A timestamp with an offset (`2027-01-04T09:00+09:00`, `2027-01-04T00:00Z`, an XLSX or Parquet
datetime with a time zone) is converted to UTC; one without an offset (`2027-01-04`,
`2027-01-04T08:00`, a naive datetime cell) is taken as UTC. The result is a naive datetime in UTC,
so that every difference between two of them is real elapsed time. Imports nothing heavy: --start
is parsed with it while the command line is read.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

TIMESTAMP_FORMS = "YYYY-MM-DD or YYYY-MM-DDTHH:MM, optionally with an offset such as +09:00 or Z"


def utc(value: datetime | date) -> datetime:
    """A date or datetime as a naive datetime in UTC (module docstring)."""
    if not isinstance(value, datetime):
        return datetime(value.year, value.month, value.day)
    if value.utcoffset() is not None:
        value = value.astimezone(UTC)
    # A plain datetime, also from a pandas Timestamp (a datetime subclass).
    return datetime(value.year, value.month, value.day, value.hour, value.minute, value.second, value.microsecond)


def parse_timestamp(text: str) -> datetime | None:
    """ISO 8601 text as a naive UTC datetime; None when it is not a timestamp."""
    try:
        return utc(datetime.fromisoformat(text.strip()))
    except (ValueError, OverflowError):  # OverflowError: an offset that leaves year 1..9999
        return None
