"""Two quick Ctrl-C during a batch's first seconds: exit 130 and at most the batch's own lines,
never a traceback. Before: a forkserver child abandoned mid-hand-over printed 20 lines
(`_pickle.UnpicklingError: pickle data was truncated`), a child rebuilding an unlinked semaphore a
FileNotFoundError, and a second Ctrl-C during the interpreter's shutdown ended the process by
SIGINT (exit -2). The process is the real executable (`python -m vramplan`): the exit path is
cli.run's."""

from __future__ import annotations

import csv
import signal
import subprocess
import sys
import time

import pytest


@pytest.mark.slow
@pytest.mark.parametrize("first_s, gap_s", [(0.8, 0.05), (1.5, 0.0), (2.2, 0.05)])
def test_two_quick_ctrl_c_end_in_one_or_two_lines(tmp_path, first_s, gap_s):
    jobs = tmp_path / "jobs.csv"
    with jobs.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["model", "seq_len", "max_gpus"])
        writer.writerows([["llama-3.1-70b", 1024 * (1 + i % 32), 8 + i % 256] for i in range(2000)])
    process = subprocess.Popen([sys.executable, "-m", "vramplan", "batch", str(jobs), "-o", str(tmp_path / "o.csv"),
                                "--workers", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(first_s)
    process.send_signal(signal.SIGINT)
    time.sleep(gap_s)
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, (process.returncode, stderr)
    assert "Traceback" not in stderr and "vramplan worker:" not in stderr, stderr
    assert len(stderr.strip().splitlines()) <= 2, stderr
