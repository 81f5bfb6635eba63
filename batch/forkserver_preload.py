"""What the batch's forkserver imports before it forks workers (batch/pool.py WORKER_MODULE): the
worker's module, and a quiet last resort for the forked children.

A child the forkserver forks reads its task from the batch process; when the batch process stops
in that instant (Ctrl-C, twice, in the first seconds), the child finds the pickle cut short and
multiprocessing/forkserver.py hands the exception to sys.excepthook, which printed a 20-line
traceback (`_pickle.UnpicklingError: pickle data was truncated`) under the batch's own
"aborted". The children inherit this hook: the parent is gone, so they end without a word
(VRAMPLAN_DEBUG=1 keeps Python's own hook)."""

from __future__ import annotations

import pickle
import sys

import vramplan.batch.worker  # noqa: F401  (the preload: every worker forks with the solver imported)
from vramplan.models.core.debug import debug_enabled

# What a child meets when the batch process went away during the hand-over: the task's pickle cut
# short, its pipe closed, or (FileNotFoundError) the pool's semaphores already unlinked by the
# parent's exit when the child rebuilds them (multiprocessing/synchronize.py SemLock._rebuild).
# Only the hand-over reaches this hook: a worker's own failures are its rows' errors.
PARENT_GONE = (EOFError, pickle.UnpicklingError, ConnectionError, FileNotFoundError, KeyboardInterrupt)


def quiet_hook(kind: type[BaseException], error: BaseException, trace: object) -> None:
    if issubclass(kind, PARENT_GONE):
        return
    sys.stderr.write(f"vramplan worker: {kind.__name__}: {' '.join(str(error).split())[:300]}\n")


if not debug_enabled():
    sys.excepthook = quiet_hook
