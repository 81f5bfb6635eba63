"""The journal of `vramplan batch`, and how rows of an earlier run are recognised on --resume.

The journal `<output>.partial.jsonl` (format 2) has a header line (the format, whether the earlier
output may be trusted, a content hash of each catalogue), then one JSON line per completed row:
its input index, a hash of its input cells, and its answer. Every line carries the checksum of
the rest of it. Each line is flushed as the row completes (so a batch killed at any moment keeps
every completed row on disk) and fsynced at least once a second (so they survive a crash of the
machine too). A torn last line, from a kill in the middle of a write, is ignored when read and
cut off before appending; any other line that is not one this vramplan wrote (not UTF-8, not
JSON, a wrong type, a failed checksum, another format) makes --resume refuse the journal with one
line naming it (read_journal): it is trusted whole or not at all.

A row counts as answered on --resume when a journal line has its index and its key, or when the
earlier output holds a row with the same key (the answer is a pure function of the row and the
catalogues: the command solves every row again when the catalogues' hashes changed). The key
hashes the cells, compared by `canonical` so that "8", 8 and 8.0 are one value and neutralised
text ('=x) equals the text it came from, together with what the row parses to (its job or its
error), so two spellings that parse differently are never one row.
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
from typing import TYPE_CHECKING, Any

from vramplan.models.core.errors import CommandFailure, VramplanError
from vramplan.sheets.rows import ANSWER_TYPES, ANSWERED_STATUSES, is_empty, parse_row
from vramplan.sheets.sheet_files import plain, unneutralise

if TYPE_CHECKING:
    from vramplan.models.catalogue.catalogue import Catalogue

JOURNAL_SUFFIX = ".partial.jsonl"
JOURNAL_KIND = "vramplan-batch-journal"
JOURNAL_VERSION = 2
CHECKSUM = "sum"  # the key of every line's checksum
CATALOGUE_HASHES = "catalogue_hashes"  # the header's key of the catalogues' content hashes
CHECKSUM_CHARS = 16  # hex digits of sha256 kept: 64 bits, against corruption, not against forgery
FSYNC_EVERY_S = 1.0


def canonical(value: Any) -> str:
    """One text per cell value, the same whether it was read from the input or from our output."""
    if is_empty(value):
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        try:
            return repr(float(value))
        except OverflowError:  # an integer past float's range (JSON lines): its digits, as its text gives
            return str(value)
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
    except (TypeError, ValueError, OverflowError):  # an output edited by hand: `inf` in an integer column
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


def catalogue_hashes(catalogue: Catalogue) -> dict[str, str]:
    """A content hash of each catalogue the rows' answers depend on, by the option that names it
    (the packaged stacks have none): what the loader read, so a file edited under the same name
    (or a vramplan whose packaged catalogues differ) counts as changed."""
    from vramplan.models.catalogue.catalogue import load_stack_capabilities, load_stacks

    stacks = {**load_stacks(), **{f"{name} runs": runs for name, runs in load_stack_capabilities().items()}}
    tables: dict[str, Mapping[str, Any]] = {"gpus-csv": catalogue.gpus, "offerings-csv": catalogue.offerings,
                                            "models-csv": catalogue.architectures, "stacks": stacks}
    return {option: _digest({name: _ordered(row.model_dump()) for name, row in table.items()})
            for option, table in tables.items()}


def _ordered(value: Any) -> Any:
    """A dumped catalogue row as JSON whose text is the same in every process: sets (the stacks'
    choices) sorted, since their order follows the process's string hashing; dates as text."""
    if isinstance(value, dict):
        return {str(key): _ordered(item) for key, item in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted((_ordered(item) for item in value), key=repr)
    if isinstance(value, (list, tuple)):
        return [_ordered(item) for item in value]
    return value if value is None or isinstance(value, (str, int, float)) else str(value)


def _digest(record: Any) -> str:
    """The checksum of a JSON value: sha256 of its canonical text (sorted keys, ASCII), shortened."""
    text = json.dumps(record, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:CHECKSUM_CHARS]


def _line(record: dict[str, Any]) -> str:
    """One journal line: the record as JSON (made plain first: what is read back is what was
    summed) with its checksum."""
    plain_record = json.loads(json.dumps(record, default=str))
    return json.dumps({**plain_record, CHECKSUM: _digest(plain_record)}, ensure_ascii=True) + "\n"


class JournalError(VramplanError):
    """A journal --resume cannot trust (exit 2): `journal='<path>': <what is wrong>; move it away ...`."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__("journal", str(path), f"{problem}; move it away to start afresh")


def _record(line: bytes, number: int, path: Path) -> dict[str, Any]:
    """A complete line as the record it holds (its checksum not checked yet)."""
    try:
        record = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        raise JournalError(path, f"line {number} is not UTF-8 text (edited or corrupt)") from None
    except (ValueError, RecursionError):
        raise JournalError(path, f"line {number} is not JSON (edited or corrupt)") from None
    if not isinstance(record, dict):
        raise JournalError(path, f"line {number} is not a journal record (edited or corrupt)")
    return record


def _checked(record: dict[str, Any], number: int, path: Path) -> dict[str, Any]:
    """The record without its checksum, which must be the checksum of the rest."""
    summed = record.pop(CHECKSUM, None)
    if not isinstance(summed, str) or summed != _digest(record):
        raise JournalError(path, f"line {number} fails its checksum (edited or corrupt)")
    return record


def _header(record: dict[str, Any], path: Path) -> dict[str, Any]:
    """Line 1: the header of a journal of this format, checksum and all."""
    if record.get("kind") != JOURNAL_KIND:
        raise JournalError(path, "line 1 is not the header of a vramplan batch journal (is this file one?)")
    version = record.get("version")
    if version == 1:
        raise JournalError(path, "was written by an older vramplan (journal format 1, whose lines have no checksums)")
    if version != JOURNAL_VERSION:
        shown = f"format {version}" if type(version) is int else "an unknown format"
        raise JournalError(path, f"is a journal of {shown}; this vramplan reads format {JOURNAL_VERSION}")
    record = _checked(record, 1, path)
    catalogues = record.get(CATALOGUE_HASHES)
    if not isinstance(record.get("trust_output"), bool) or not isinstance(catalogues, dict) or not all(
            isinstance(value, str) for value in catalogues.values()):
        raise JournalError(path, "line 1 is not the header of a vramplan batch journal (is this file one?)")
    return record


def _entry(record: dict[str, Any], number: int, path: Path) -> dict[str, Any]:
    """A row's line: its index, its key and its answer, of their types, checksum and all."""
    record = _checked(record, number, path)
    row, answer = record.get("row"), record.get("answer")
    if (type(row) is not int or row < 0 or not isinstance(record.get("key"), str) or not isinstance(answer, dict)
            or not _is_answer(answer)):
        raise JournalError(path, f"line {number} is not a row of a journal (edited or corrupt)")
    return record


def _is_answer(answer: dict[str, Any]) -> bool:
    """Every answer column the record has holds a value of its type (a float column takes an int)."""
    if answer.get("status") not in ANSWERED_STATUSES:
        return False
    for column, kind in ANSWER_TYPES.items():
        value = answer.get(column)
        wanted = (int, float) if kind is float else kind
        if value is not None and (not isinstance(value, wanted) or (kind is not bool and isinstance(value, bool))):
            return False
    return True


def read_journal(path: Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(header, entries) of the journal at `path`; (None, []) when there is none, or when it holds no
    complete line (killed before its header was written). A torn last line (the batch was killed
    while writing it) is skipped; anything else that is not a line this vramplan wrote, checksum
    and all, raises JournalError naming the line: a journal is trusted whole or not at all."""
    refuse_odd_journal(path)
    if not path.exists():
        return None, []
    header, entries = None, []
    try:
        with path.open("rb") as handle:
            for number, line in enumerate(handle, 1):
                if not line.endswith(b"\n"):
                    break  # the torn last line
                record = _record(line, number, path)
                if header is None:
                    header = _header(record, path)
                else:
                    entries.append(_entry(record, number, path))
    except OSError as error:
        raise CommandFailure(f"journal={str(path)!r}: cannot read: {error.strerror or error}") from None
    return header, entries


class Journal:
    """Append-only record of completed rows; flushed per row, fsynced at most once a second.

    Format 2 (docs/batch.md): a header line {"kind", "version": 2, "trust_output", "catalogue_hashes":
    {option: hash}}, then one line per row {"row", "key", "answer"}; every line carries "sum", the
    checksum of the rest of it (sheets/journal.py _digest)."""

    def __init__(self, path: Path, fresh: bool, trust_output: bool, catalogues: dict[str, str] | None = None) -> None:
        self.path = path
        refuse_odd_journal(path)
        header = {"kind": JOURNAL_KIND, "version": JOURNAL_VERSION, "trust_output": trust_output,
                  CATALOGUE_HASHES: catalogues or {}}
        try:
            if fresh or not path.exists():  # never over a file: the command refuses an existing journal
                self._handle, kept = path.open("x", encoding="ascii"), 0
            else:
                kept = self._drop_torn_tail()
                self._handle = path.open("a", encoding="ascii")
            if not kept:  # new, or killed before its header was written
                self._write(header)
        except FileExistsError:
            raise CommandFailure(f"journal={str(path)!r}: appeared while this run started (another run?); "
                                 "not overwritten") from None
        except OSError as error:
            raise CommandFailure(f"journal={str(path)!r}: cannot write: {error.strerror or error}") from None
        self._synced = time.monotonic()

    def _drop_torn_tail(self) -> int:
        """Cut a torn last line off; the bytes kept."""
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end < len(data):
            with self.path.open("r+b") as handle:
                handle.truncate(end)
        return end

    def _write(self, record: dict[str, Any]) -> None:
        self._handle.write(_line(record))
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
