"""What runs on a batch worker: solve a chunk of jobs, return their answer rows.

Jobs travel as plain dicts (SolveQuery.model_dump()) and answers come back as flat dicts of
cells: CP-SAT objects never cross a process boundary (they do not pickle). Every failure of one
job becomes its own status=error row; a chunk only fails when the worker itself dies.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import threading
import time
from importlib import metadata
from typing import Any

from pydantic import ValidationError

from vramplan.batch.gc_pacing import GcPacing
from vramplan.models.catalogue.catalogue import Catalogue
from vramplan.models.core.debug import debug_enabled
from vramplan.models.core.errors import VramplanError, from_validation_error
from vramplan.sheets.rows import error_row, output_row
from vramplan.solver.api import solve
from vramplan.solver.query import SolveQuery
from vramplan.solver.table_memo import TableMemo

log = logging.getLogger(__name__)

PACKAGE = "vramplan"
PARENT_POLL_S = 0.5  # where there is no pidfd

# The catalogue of this worker process, set once by the process pool's initializer.
_worker_catalogue: Catalogue | None = None
# The models/ values behind the integer tables, per (model, job, global batch), for every chunk.
_tables = TableMemo()
# The cyclic collector skips what the memo keeps from one chunk to the next (batch/gc_pacing.py).
_gc_pacing = GcPacing()


def package_version() -> str:
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return "not installed"


def solve_job(catalogue: Catalogue, job: dict[str, Any], tables: TableMemo | None = None) -> dict[str, Any]:
    """One job's answer row; never raises for a bad job."""
    try:
        return output_row(solve(catalogue, SolveQuery.model_validate(job), memo=tables))
    except VramplanError as error:
        return error_row(str(error))
    except ValidationError as error:
        return error_row(str(from_validation_error(error, job)))
    except Exception as error:  # noqa: BLE001 - a bug in one job must not lose the others
        log.debug("internal error solving %s", job.get("model"), exc_info=True)  # the row says what
        return error_row(f"internal error: {type(error).__name__}: {error}")


def solve_chunk(catalogue: Catalogue, jobs: list[dict[str, Any]], memo: bool = True,
                pace_gc: bool = True) -> tuple[str, list[dict[str, Any]]]:
    """(this worker's vramplan version, one answer row per job, in order). With `memo`, the
    solves share this process's table memo (solver/table_memo.py): the same answers, sooner.
    With `pace_gc` (a worker process: pool, Ray or Dask), the cyclic collector skips what each
    row leaves alive (batch/gc_pacing.py); the serial backend runs in the caller's process and
    leaves its collector alone."""
    if not memo:
        return package_version(), [solve_job(catalogue, job) for job in jobs]
    answers = []
    for job in jobs:
        answers.append(solve_job(catalogue, job, _tables))
        if pace_gc:
            _gc_pacing.after_row()
    if pace_gc:
        _gc_pacing.after_chunk()
    return package_version(), answers


def init_pool_worker(catalogue: Catalogue, parent_pid: int | None = None) -> None:
    """Process-pool initializer: keep the catalogue, leave Ctrl-C to the parent (it stops the pool),
    print nothing (each row's answer says what went wrong; VRAMPLAN_DEBUG=1 shows tracebacks), and
    die with the batch process even when it is killed with -9.

    Ignoring SIGINT is not enough for Ctrl-C: CP-SAT installs its own SIGINT handler for each solve
    whose catch_sigint_signal is on (the planner's are off since; the fleet's keep it for their
    best-so-far on Ctrl-C) and leaves the default action behind, so the terminal's Ctrl-C, sent to
    the whole foreground process group, killed every worker after its first solve (one spurious
    "worker process died" line, and a solve interrupted mid-search could come back 'feasible').
    A pool worker therefore leaves the terminal's process group: Ctrl-C reaches only the batch
    process, which stops the pool itself."""
    global _worker_catalogue
    _worker_catalogue = catalogue
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if not debug_enabled():
        logging.getLogger().addHandler(logging.NullHandler())  # no last-resort stderr handler
    if parent_pid is not None:
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
        watch_parent(parent_pid)


def watch_parent(parent_pid: int) -> None:
    """Exit this worker as soon as the batch process `parent_pid` is gone.

    A forkserver worker's parent is the forkserver, not the batch process, and the pool's queues
    never report EOF to it (the worker holds both ends), so nothing else would stop it: a
    daemon thread waits on a pidfd of the batch process (Linux), or polls for it elsewhere."""
    try:
        pidfd = os.pidfd_open(parent_pid)
    except (AttributeError, OSError):
        pidfd = None
    if not _alive(parent_pid):
        os._exit(1)

    def wait() -> None:
        if pidfd is not None:
            select.select([pidfd], [], [])  # readable once the process has exited
        else:
            while _alive(parent_pid):
                time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=wait, name="vramplan-parent-watch", daemon=True).start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def solve_chunk_in_pool(jobs: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    if _worker_catalogue is None:
        raise RuntimeError("the batch worker was started without a catalogue")
    return solve_chunk(_worker_catalogue, jobs)
