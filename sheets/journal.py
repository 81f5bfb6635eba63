"""The journal of `vramplan batch`, and how rows of an earlier run are recognised on --resume.

The journal `<output>.partial.jsonl` has a header line, then one JSON line per completed row: its
input index, a hash of its input cells, and its answer. Each line is flushed as the row completes
(so a batch killed at any moment keeps every completed row on disk) and fsynced at least once a
second (so they survive a crash of the machine too). A torn last line, from a kill in the middle
of a write, is ignored when read and cut off before appending.

A row counts as answered on --resume when a journal line has its index and its key, or when the
earlier output holds a row with the same key (the answer is a pure function of the row and the
catalogues). The key hashes the cells, compared by `canonical` so that "8", 8 and 8.0 are one
value and neutralised text ('=x) equals the text it came from, together with what the row parses
to (its job or its error), so two spellings that parse differently are never one row.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import stat
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vramplan.models.core.errors import CommandFailure, VramplanError
from vramplan.sheets.rows import ANSWER_TYPES, is_empty, parse_row
from vramplan.sheets.sheet_files import plain, unneutralise

JOURNAL_SUFFIX = ".partial.jsonl"
JOURNAL_KIND = "vramplan-batch-journal"
FSYNC_EVERY_S = 1.0


def canonical(value: Any) -> str:
    """One text per cell value, the same whether it was read from the input or from our output."""
    if is_empty(value):
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return repr(float(value))
    text = str(value).replace("\r\n", "\n").replace("\r", "\n")  # XML (XLSX) reads CR back as LF
    text = (text[1:] if text.startswith("'\n") else unneutralise(text)).strip()
    try:
        number = float(text)
    except ValueError:
        return text
    return repr(number) if math.isfinite(number) else text


def row_key(cells: Sequence[Any], outcome: str = "") -> str:
    """A short hash of a row's input cells and of what they parse to (`outcome`: the job, or the
    row's error): resume answers a row only for the same cells that give the same job, so `1e3`
    and `1000` are one row only where both parse to the same job."""
    data = json.dumps([canonical(cell) for cell in cells] + [outcome], ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()[:20]


def parse_outcome(row: Mapping[str, Any]) -> str:
    """What a row parses to, as text: its job (the canonical SolveQuery) or its one-line error.
    Text cells read back from an output are un-neutralised first ('=x is the =x it came from)."""
    cells = {name: unneutralise(value) if isinstance(value, str) else value for name, value in row.items()}
    try:
        return parse_row(cells).model_dump_json()
    except VramplanError as error:
        return f"error: {error}"


def typed_answer(cells: dict[str, Any]) -> dict[str, Any] | None:
    """Answer cells read back from an output file, with their types; None if one does not parse."""
    answer: dict[str, Any] = {}
    try:
        for column, kind in ANSWER_TYPES.items():
            value = plain(cells.get(column))
            if is_empty(value):
                answer[column] = None
            elif kind is str:
                answer[column] = unneutralise(str(value))
            elif kind is bool:
                answer[column] = _boolean(value)
            else:
                answer[column] = kind(float(value)) if kind is int else float(value)
    except (TypeError, ValueError):
        return None
    return answer


def _boolean(value: Any) -> bool:
    """A boolean answer cell as written (True/False in CSV, a boolean in XLSX, Parquet, JSON lines)."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ValueError(value)
    return text == "true"


def journal_path(output: Path) -> Path:
    return output.with_name(output.name + JOURNAL_SUFFIX)


def refuse_odd_journal(path: Path) -> None:
    """The journal is always a regular file vramplan wrote: anything else at its path (a FIFO,
    which blocked the batch forever, or a symlink, through which a fresh run truncated the file it
    points to) is one line, never opened."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as error:
        raise CommandFailure(f"journal={str(path)!r}: cannot read: {error.strerror or error}") from None
    if not stat.S_ISREG(mode):
        raise CommandFailure(f"journal={str(path)!r}: exists and is not a regular file (a link, FIFO or device); "
                             "move it away")


def read_journal(path: Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(header, entries); a torn last line (the batch was killed while writing it) is skipped."""
    refuse_odd_journal(path)
    if not path.exists():
        return None, []
    header, entries = None, []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and record.get("kind") == JOURNAL_KIND:
                header = record
            elif isinstance(record, dict) and {"row", "key", "answer"} <= record.keys():
                entries.append(record)
    return header, entries


class Journal:
    """Append-only record of completed rows; flushed per row, fsynced at most once a second."""

    def __init__(self, path: Path, fresh: bool, trust_output: bool) -> None:
        self.path = path
        refuse_odd_journal(path)
        try:
            if fresh or not path.exists():  # never over a file: the command refuses an existing journal
                self._handle = path.open("x", encoding="utf-8")
                self._write({"kind": JOURNAL_KIND, "version": 1, "trust_output": trust_output})
            else:
                self._drop_torn_tail()
                self._handle = path.open("a", encoding="utf-8")
        except FileExistsError:
            raise CommandFailure(f"journal={str(path)!r}: appeared while this run started (another run?); "
                                 "not overwritten") from None
        except OSError as error:
            raise CommandFailure(f"journal={str(path)!r}: cannot write: {error.strerror or error}") from None
        self._synced = time.monotonic()

    def _drop_torn_tail(self) -> None:
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end < len(data):
            with self.path.open("r+b") as handle:
                handle.truncate(end)

    def _write(self, record: dict[str, Any]) -> None:
        self._handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self._handle.flush()

    def append(self, row: int, key: str, answer: dict[str, Any]) -> None:
        try:
            self._write({"row": row, "key": key, "answer": answer})
            if time.monotonic() - self._synced >= FSYNC_EVERY_S:
                os.fsync(self._handle.fileno())
                self._synced = time.monotonic()
        except OSError as error:  # disk full: the rows already journalled are kept
            raise CommandFailure(f"journal={str(self.path)!r}: cannot write: {error.strerror or error}") from None

    def close(self) -> None:
        if not self._handle.closed:
            try:
                self._handle.flush()
                os.fsync(self._handle.fileno())
            except OSError:
                pass  # append() has reported it; what reached the disk stays readable
            finally:
                with contextlib.suppress(OSError):  # a full disk fails the buffer's last flush again
                    self._handle.close()

    def remove(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class NoJournal:
    """No journal: the output is a device or a pipe (nothing to resume from, no file beside it)."""

    path = None

    def append(self, row: int, key: str, answer: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass

    def remove(self) -> None:
        pass
