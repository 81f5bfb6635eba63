"""The local backend's process helpers, without the solver's imports: batch/run.py starts the
forkserver (which imports the solver once, for every worker it forks) before it plans the rows,
so that import runs beside the planning."""

from __future__ import annotations

import multiprocessing
import signal
import threading

WORKER_MODULE = "vramplan.batch.forkserver_preload"  # what the forkserver imports before forking workers


def pool_context() -> multiprocessing.context.BaseContext:
    """forkserver where the platform has it (workers fork from a clean process that already imported
    the solver), else spawn; never plain fork from a process that may hold threads."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([WORKER_MODULE])
        return context
    return multiprocessing.get_context("spawn")


def start_helpers_ignoring_ctrl_c() -> None:
    """Start the forkserver (importing the solver: pool_context's preload, which must be set before
    it starts, or it preloads only __main__ and every worker imports the solver itself after its
    fork) and the resource tracker with SIGINT ignored. They inherit that through
    exec, so a Ctrl-C while the forkserver is still importing the solver (the first seconds of a
    batch) prints no KeyboardInterrupt traceback, and the workers it forks ignore Ctrl-C from their
    first instruction (batch/worker.py then moves them out of the terminal's process group).
    The batch process ignores Ctrl-C only while the two are spawned (fork + exec, milliseconds;
    neither waits for the forkserver's imports); blocking the signal instead would not keep it:
    numpy's and ortools' native threads, which do not block it, would take it and drop it."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be changed there; the pool starts its helpers as usual
    from multiprocessing import forkserver, resource_tracker

    pool_context()  # the preload list
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        resource_tracker.ensure_running()
        forkserver.ensure_running()
    finally:
        signal.signal(signal.SIGINT, previous)
