"""Batch worker processes (batch/pool.py, batch/worker.py): --workers is clamped to the CPUs this
process may use, a worker's exception is an error row without a traceback, and a batch killed
with -9 takes its workers, forkserver and resource tracker with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.cli import invoke
from helpers.sheets import FAST, write_csv

GOOD = {"model": "llama-3.1-8b", "seq_len": "2048", **FAST}


def test_more_workers_than_cpus_is_clamped_with_one_warning(tmp_path):
    jobs = write_csv(tmp_path / "jobs.csv", [GOOD])
    result = invoke("batch", str(jobs), "-o", str(tmp_path / "plans.csv"), "--workers", "300")
    assert result.exit_code == 0, result.stderr
    available = len(os.sched_getaffinity(0))
    assert result.stderr.splitlines()[0] == (f"warning: --workers 300: this machine runs {available} at once; "
                                             f"using {available}")


WORKER_BUG = """
import sys
from vramplan.batch import worker
from vramplan.models.catalogue.catalogue import load_catalogue
def broken(catalogue, query, **kwargs):
    raise RuntimeError("a bug")
worker.solve = broken
worker.init_pool_worker(load_catalogue())
from vramplan.sheets.rows import parse_row
job = parse_row({"model": "llama-3.1-8b", "seq_len": "2048"}).model_dump(mode="json")
answer = worker.solve_job(worker._worker_catalogue, job)
print(answer["status"], answer["error"])
"""


def test_a_worker_exception_prints_no_traceback(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "VRAMPLAN_DEBUG"}
    done = subprocess.run([sys.executable, "-c", WORKER_BUG], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.strip() == "error internal error: RuntimeError: a bug"


def _descendants(pid: int) -> set[int]:
    """Every process below `pid`, from /proc (parents first)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
def test_kill_9_of_a_batch_takes_its_workers_forkserver_and_tracker_with_it(tmp_path):
    rows = [{"model": "llama-3.1-8b", "seq_len": str(512 + i)} for i in range(400)]  # unrestricted: slow
    jobs = write_csv(tmp_path / "jobs.csv", rows)
    output = tmp_path / "plans.csv"
    batch = subprocess.Popen([sys.executable, "-m", "vramplan", "batch", str(jobs), "-o", str(output),
                              "--workers", "2", "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    journal = tmp_path / "plans.csv.partial.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not journal.exists() or journal.read_text().count("\n") < 2):
        time.sleep(0.2)
    helpers = _descendants(batch.pid)
    assert len(helpers) >= 3, helpers  # forkserver, resource tracker, workers
    batch.send_signal(signal.SIGKILL)
    stdout, stderr = batch.communicate(timeout=30)  # returns only once nobody holds the pipes open
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(_alive(pid) for pid in helpers):
        time.sleep(0.2)
    assert [pid for pid in helpers if _alive(pid)] == []
