"""The forkserver's preload (batch/forkserver_preload.py): its forked workers inherit a quiet
excepthook. Two quick Ctrl-C while a batch's workers were starting printed, under the batch's own
`aborted`, a 20-line traceback of a child that found its task's pickle cut short
(`_pickle.UnpicklingError: pickle data was truncated`, multiprocessing/forkserver.py hands it to
sys.excepthook)."""

from __future__ import annotations

import subprocess
import sys

from vramplan.batch.pool import WORKER_MODULE


def test_the_forkserver_preloads_the_quiet_module():
    assert WORKER_MODULE == "vramplan.batch.forkserver_preload"


def _hook_output(kind: str, debug: bool) -> subprocess.CompletedProcess:
    code = ("import sys, pickle, vramplan.batch.forkserver_preload as p\n"
            f"try:\n    raise {kind}('cut short')\n"
            "except BaseException:\n    sys.excepthook(*sys.exc_info())\n")
    env = {"VRAMPLAN_DEBUG": "1"} if debug else {}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**env, "PATH": "/usr/bin:/bin"})


def test_a_child_whose_parent_went_away_ends_without_a_word():
    assert _hook_output("pickle.UnpicklingError", debug=False).stderr == ""
    assert _hook_output("EOFError", debug=False).stderr == ""


def test_any_other_failure_is_one_line_and_debug_keeps_the_traceback():
    assert _hook_output("ValueError", debug=False).stderr == "vramplan worker: ValueError: cut short\n"
    assert "Traceback" in _hook_output("pickle.UnpicklingError", debug=True).stderr
