"""What `vramplan batch` does: solve every row of a capacity-planning spreadsheet, losing nothing.
commands/batch.py declares the options and imports this module only when the command runs, so
that `batch --help` loads no pydantic, solver or sheet machinery.

Flow: read the jobs and check the header (a misspelt column stops everything, exit 2; a column of the
user's own is copied to the output unless --strict-columns; a row the sheet does not give whole is
that row's error); on --resume take the rows already answered from the journal and the existing
output (a journal that is not whole and this vramplan's format is refused, exit 2; one written
with other catalogues is started afresh and every row solved again); solve the rest
(batch/run.py), appending each completed row to the journal `<output>.partial.jsonl` as it
arrives; at the end write the output in input order atomically and delete the journal.
Ctrl-C (or SIGTERM) stops the workers, writes the output with every finished row (unfinished rows
have an empty status and say so in `error`), keeps the journal for --resume, and exits 130.

Exit codes: 0 every row solved; 3 some rows infeasible or errors (all rows still written);
1 the batch itself could not run; 2 bad input (unknown column, unreadable jobs file); 130 stopped.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from vramplan.commands.exits import EXIT_INFEASIBLE, EXIT_INTERRUPTED
from vramplan.commands.options import catalogue_files, models_dir_of, open_catalogue
from vramplan.models.core.errors import VramplanError
from vramplan.sheets.journal import (
    CATALOGUE_HASHES,
    Journal,
    NoJournal,
    catalogue_hashes,
    journal_path,
    parse_outcome,
    read_journal,
    refuse_odd_journal,
    row_key,
    typed_answer,
)
from vramplan.sheets.output_file import OutputTarget, lock_output, output_target, refuse_held_output, refuse_inputs
from vramplan.sheets.rows import ANSWER_COLUMNS, ANSWERED_STATUSES, INPUT_COLUMNS, check_columns, error_row
from vramplan.sheets.sheet_files import format_of, read_table, require_extra, write_table

SOLVED = ("optimal", "feasible")
BACKEND_MODULES = {"ray": "ray", "dask": "distributed"}
NOT_SOLVED_MESSAGE = "not solved yet: the batch was interrupted; run the same command with --resume"


def require_backend(backend: str) -> None:
    """A missing engine is one clear line before anything runs."""
    module = BACKEND_MODULES.get(backend)
    if module is not None:
        try:
            __import__(module)
        except ImportError:
            raise click.ClickException(f"the {backend} backend needs {backend}: "
                                       f"pip install 'vramplan[{backend}]'") from None


def answer_header(input_columns: list[str]) -> list[str]:
    """Answer columns; one that an input column already names (a pin such as zero) gets a plan_ prefix."""
    taken = set(input_columns)
    return [f"plan_{name}" if name in taken else name for name in ANSWER_COLUMNS]


def _answers_from_output(output: Path, fmt: str, columns: list[str], keys: list[str]) -> dict[int, dict[str, Any]]:
    """Rows of an earlier output whose input cells equal an input row's (the answer is a pure
    function). The output is evidence only: one that cannot be read is one warning line."""
    unread: dict[int, VramplanError] = {}
    try:
        header, rows = read_table(output, fmt, row_errors=unread)
    except (VramplanError, OSError, ValueError) as error:
        click.echo(f"warning: cannot read {output} ({error}); not reusing its rows", err=True)
        return {}
    if header != columns + answer_header(columns):
        click.echo(f"warning: {output} has other columns than this batch's output; not reusing its rows", err=True)
        return {}
    by_key: dict[str, dict[str, Any]] = {}
    for at, row in enumerate(rows):
        answer = typed_answer(dict(zip(ANSWER_COLUMNS, row[len(columns):])))
        if at not in unread and answer is not None and answer["status"] in ANSWERED_STATUSES:
            cells = row[: len(columns)]
            by_key[row_key(cells, parse_outcome(_job_cells(columns, cells)))] = answer
    return {i: by_key[key] for i, key in enumerate(keys) if key in by_key}


def _resumed_answers(output: Path, fmt: str, columns: list[str], keys: list[str], catalogues: dict[str, str],
                     quiet: bool) -> dict[int, dict[str, Any]] | None:
    """The answers --resume keeps from the journal and the earlier output; None when the journal
    was written with other catalogues (every row is solved again, and the journal started afresh).
    A journal that is not whole and this vramplan's raises JournalError (sheets/journal.py)."""
    path = journal_path(output)
    header, entries = read_journal(path)
    if header is not None and header[CATALOGUE_HASHES] != catalogues:
        if not quiet:
            changed = sorted(name for name in {*header[CATALOGUE_HASHES], *catalogues}
                             if header[CATALOGUE_HASHES].get(name) != catalogues.get(name))
            click.echo(f"note: the catalogues ({', '.join(changed)}) changed since {path} was written; "
                       "every row is solved again", err=True)
        return None
    answers: dict[int, dict[str, Any]] = {}
    if output.exists() and (header is None or header["trust_output"]):
        answers.update(_answers_from_output(output, fmt, columns, keys))
    for entry in entries:
        row, answer = entry["row"], entry["answer"]
        if row < len(keys) and entry["key"] == keys[row]:
            answers[row] = {column: answer.get(column) for column in ANSWER_COLUMNS}
    return answers


@contextmanager
def _stop_on_signals(stop: threading.Event):
    """First Ctrl-C/SIGTERM: set `stop` (the batch winds down); a second one acts as usual."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}

    def handler(signum: int, frame: Any) -> None:
        stop.set()
        signal.signal(signum, previous[signum])

    for signum in (signal.SIGINT, signal.SIGTERM):
        previous[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


@contextmanager
def _progress_bar(total: int, enabled: bool):
    if not enabled:
        yield lambda done, total_rows: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeRemainingColumn
    from rich.text import Text

    from vramplan.commands.output import console_environ

    class RowsPerSecond(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text(f"{task.speed or 0:,.1f} rows/s")

    columns = (TextColumn("batch"), BarColumn(), MofNCompleteColumn(), TextColumn("rows"), RowsPerSecond(),
               TextColumn("ETA"), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True, _environ=console_environ()), transient=False) as progress:
        task = progress.add_task("batch", total=total)
        yield lambda done, total_rows: progress.update(task, completed=done)


def _job_cells(columns: list[str], cells: list[Any]) -> dict[str, Any]:
    """The cells of a row that make its job (the user's own columns only travel to the output)."""
    return {name: cell for name, cell in zip(columns, cells) if name in INPUT_COLUMNS}


def _row_keys(columns: list[str], table: list[list[Any]], unread: dict[int, VramplanError], catalogue: Any,
              models_dir: Path) -> list[str]:
    """The resume key of each row: its cells, what they parse to (sheets/journal.py; a row the
    sheet did not give whole, its read error) and the content of the config.json its model cell
    names, so that --resume solves a row again when the file changed under the same name (before,
    it kept the old answer: 138.7 USD where a fresh run says 276.66)."""
    at = columns.index("model") if "model" in columns else None
    names = {name.lower() for name in catalogue.architectures}
    keys = []
    for i, cells in enumerate(table):
        outcome = f"error: {unread[i]}" if i in unread else parse_outcome(_job_cells(columns, cells))
        cell = cells[at] if at is not None and at < len(cells) else None
        keys.append(row_key(cells, outcome + _config_fingerprint(cell, names, models_dir)))
    return keys


def _config_fingerprint(cell: Any, catalogue_names: set[str], models_dir: Path) -> str:
    """A hash of the config.json a model cell names inside the models folder ('' for a catalogue
    name, an empty cell or a file that cannot be read: those rows' keys are their cells alone)."""
    import hashlib
    import os
    import stat

    from vramplan.models.catalogue.config_file import MAX_CONFIG_BYTES, config_path, read_small_file

    if not isinstance(cell, str) or not cell.strip() or cell.strip().lower() in catalogue_names:
        return ""
    try:
        path = config_path(cell.strip(), models_dir)
        if path is None or not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO is never opened: it would block
            return ""
        return " config " + hashlib.sha256(read_small_file(path, "model", cell, MAX_CONFIG_BYTES).encode()).hexdigest()[:16]
    except (VramplanError, OSError):
        return ""


def _read_jobs(options: dict[str, Any]) -> tuple[list[str], list[list[Any]], dict[int, VramplanError]]:
    """The jobs sheet and its header, checked, and the rows it did not give whole (a formula with
    no saved value, a CSV line with a field missing or one too many: each that row's error); one
    warning line per oddity (unless -q)."""
    warnings: list[str] = []
    unread: dict[int, VramplanError] = {}
    columns, table = read_table(options["jobs"], format_of(options["jobs"], None, "jobs"), warnings, row_errors=unread)
    extra = check_columns(columns, strict=options["strict_columns"])
    if extra:
        names = ", ".join(repr(name) for name in extra)
        plural = len(extra) > 1
        warnings.append(f"column{'s' if plural else ''} {names} {'are' if plural else 'is'} not vramplan's: "
                        "copied to the output unchanged (--strict-columns makes them errors)")
    if not options["quiet"]:
        for warning in warnings:
            click.echo(f"warning: {warning}", err=True)
    return columns, table, unread


def _workers(options: dict[str, Any]) -> int | None:
    """--workers, clamped to the CPUs this process may use for the local pool (one warning line)."""
    from vramplan.batch.backends import default_workers  # loads the solver: not for --help

    workers, available = options["workers"], default_workers()
    if options["backend"] == "local" and workers is not None and workers > available:
        if not options["quiet"]:
            click.echo(f"warning: --workers {workers}: this machine runs {available} at once; using {available}",
                       err=True)
        return available
    return workers


def _files_read(options: dict[str, Any]) -> list[tuple[str, Path | None]]:
    """Every file the run reads: the output may be none of them (nor may its journal)."""
    return [("jobs", options["jobs"]), *catalogue_files(options)]


def _config_files_read(columns: list[str], table: list[list[Any]], catalogue: Any,
                       models_dir: Path) -> list[tuple[str, Path | None]]:
    """The config.json files the sheet's model cells name (read inside the models folder): the
    output may not replace one of them either."""
    from vramplan.models.catalogue.config_file import config_path

    if "model" not in columns:
        return []
    at, found = columns.index("model"), {}
    names = {name.lower() for name in catalogue.architectures}
    for cells in table:
        cell = cells[at] if at < len(cells) else None
        if not isinstance(cell, str) or not cell.strip() or cell.strip().lower() in names:
            continue
        try:
            path = config_path(cell.strip(), models_dir)
        except VramplanError:  # outside the folder or missing: the row's own error, read by no one
            continue
        if path is not None:
            found.setdefault(path, None)
    return [("model config", path) for path in found]


def _open_journal(options: dict[str, Any], journal_file: Path | None, catalogues: dict[str, str],
                  stale: bool) -> Journal | NoJournal:
    """This run's journal: a new one, or on --resume the one it resumes. A stale one, written with
    other catalogues, is replaced by a new one that keeps none of its rows and does not trust the
    earlier output either (its rows were solved with those catalogues too)."""
    if journal_file is None:
        return NoJournal()
    if stale:
        journal_file.unlink(missing_ok=True)
    return Journal(journal_file, fresh=not options["resume"] or stale, trust_output=options["resume"] and not stale,
                   catalogues=catalogues)


def _run_and_write(options: dict[str, Any], target: OutputTarget, fmt: str, journal_file: Path | None,
                   sheet: tuple[list[str], list[list[Any]], dict[int, VramplanError]], catalogue: Any,
                   started: float) -> None:
    from vramplan.batch.run import BatchError, BatchOptions, run_batch  # loads ortools: not for --help

    columns, table, unread = sheet
    output = target.real
    keys = _row_keys(columns, table, unread, catalogue, models_dir_of(options))
    catalogues = catalogue_hashes(catalogue)
    resumed = _resumed_answers(output, fmt, columns, keys, catalogues, options["quiet"]) if options["resume"] else {}
    journal = _open_journal(options, journal_file, catalogues, stale=resumed is None)
    answers = {i: answer for i, answer in (resumed or {}).items() if i not in unread}
    reused = len(answers)
    answers.update((i, error_row(str(problem))) for i, problem in unread.items())  # the sheet's own errors
    todo = [(i, _job_cells(columns, cells)) for i, cells in enumerate(table) if i not in answers]
    batch_options = BatchOptions(backend=options["backend"], workers=_workers(options), address=options["address"],
                                 chunk_size=options["chunk_size"], models_dir=models_dir_of(options))
    stop = threading.Event()
    show = not options["quiet"] and sys.stderr is not None and sys.stderr.isatty()
    try:
        with _stop_on_signals(stop), _progress_bar(len(table), show) as progress:
            progress(reused, len(table))
            for i, answer in run_batch(catalogue, todo, batch_options,
                                       lambda done, total: progress(reused + done, len(table)), stop):
                answers[i] = answer
                journal.append(i, keys[i], answer)
    except BatchError as error:
        finished = len(answers) - reused - len(unread)
        kept = f"; the {finished} rows finished are kept in {journal.path}: run again with --resume" if finished else ""
        if not finished and not options["resume"]:
            journal.remove()  # this run's own journal, with nothing in it (an unreachable cluster): no --resume asked next
        raise click.ClickException(f"{error}{kept}") from None
    finally:
        journal.close()
    output = target.given
    complete = len(answers) == len(table)
    unsolved = dict.fromkeys(ANSWER_COLUMNS) | {"status": None, "error": NOT_SOLVED_MESSAGE}
    rows = [cells + [answers.get(i, unsolved)[c] for c in ANSWER_COLUMNS] for i, cells in enumerate(table)]
    write_table(target, fmt, columns + answer_header(columns), rows, answer_start=len(columns))
    if complete:
        journal.remove()
    statuses = Counter(answer["status"] for answer in answers.values())
    if not options["quiet"]:
        counts = ", ".join(f"{count} {status}" for status, count in sorted(statuses.items()))
        click.echo(f"{len(answers)} of {len(table)} rows answered ({counts or 'none'}); {reused} reused from an "
                   f"earlier run; {time.perf_counter() - started:,.1f} s -> {output}", err=True)
    if stop.is_set():
        click.echo(f"interrupted: {len(answers)} of {len(table)} rows written to {output}; "
                   f"finish with --resume", err=True)
        sys.exit(EXIT_INTERRUPTED)
    if not complete:  # cannot happen: every row is answered unless stopped
        raise click.ClickException("internal error: some rows have no answer")
    if any(status not in SOLVED for status in statuses.elements()):
        sys.exit(EXIT_INFEASIBLE)


def run_batch_command(options: dict[str, Any]) -> None:
    """The batch command's flow (module docstring)."""
    started = time.perf_counter()
    target = output_target(options["output"])
    fmt = format_of(options["output"], options["output_format"])
    format_of(options["jobs"], None, "jobs")  # a name of no sheet: before reading it
    require_extra(fmt, "writing")
    require_backend(options["backend"])
    if options["address"] is not None and options["backend"] == "local":  # it would run here, the address unread
        raise VramplanError("address", options["address"], "applies to --backend ray or dask; the backend is local")
    if options["resume"] and target.special:
        raise VramplanError("output", str(target.given), "is not a regular file; --resume needs one to read back")
    journal_file = None if target.special else journal_path(target.real)
    refuse_inputs(target, _files_read(options), journal_file)
    if journal_file is not None:
        refuse_odd_journal(journal_file)  # a link, FIFO or device there: one line, never opened
    refuse_held_output(target)  # a running batch's journal is not an unfinished run's
    if journal_file is not None and not options["resume"] and os.path.lexists(journal_file):
        raise VramplanError("output", str(target.given), f"has the journal of an unfinished run beside it "
                                                         f"({str(journal_file)!r}): add --resume to finish that run, "
                                                         "or move the journal away to start afresh")
    columns, table, unread = _read_jobs(options)
    catalogue = open_catalogue(options)
    refuse_inputs(target, _config_files_read(columns, table, catalogue, models_dir_of(options)), journal_file)
    format_of(options["output"], options["output_format"], "output", "--format")  # after: a file it reads says so
    with lock_output(target):
        _run_and_write(options, target, fmt, journal_file, (columns, table, unread), catalogue, started)


