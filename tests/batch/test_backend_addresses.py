"""A cluster address that cannot answer is one line, at once, and leaves nothing behind (issue 33:
`--backend dask --address` a missing scheduler file or a FIFO, and `--backend ray --address
127.0.0.1:1`, each waited past 200 s)."""

from __future__ import annotations

import os
import socket
import time

import pytest
from helpers.cli import invoke_batch, one_line_error
from helpers.sheets import write_csv


def _closed_port() -> str:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens on it
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.parametrize(("backend", "address", "says"), [
    ("dask", "missing.json", "cannot read the Dask scheduler file"),
    ("dask", "fifo", "is not a regular file"),
    # Dask asserted on these: `AssertionError:` with nothing after it was the whole message
    ("dask", "not-json", "is not a scheduler file (JSON with an 'address'"),
    ("dask", "no-address", "is not a scheduler file (JSON with an 'address'"),
    ("dask", "closed", "cannot reach the Dask cluster"),
    ("ray", "closed", "cannot reach the Ray cluster"),
])
def test_an_address_that_cannot_answer_fails_at_once(tmp_path, backend, address, says) -> None:
    pytest.importorskip(backend)
    jobs = write_csv(tmp_path / "jobs.csv", [{"id": "a", "model": "gpt2-124m", "seq_len": 512}])
    if address == "fifo":
        address = str(tmp_path / "scheduler")
        os.mkfifo(address)
    elif address == "closed":
        address = _closed_port()
    elif address in ("not-json", "no-address"):
        path = tmp_path / "scheduler"
        path.write_text("root:x:0:0\n" if address == "not-json" else '{"type": "Scheduler"}', encoding="utf-8")
        address = str(path)
    else:
        address = str(tmp_path / address)
    out = tmp_path / "plans.csv"
    started = time.monotonic()
    line = one_line_error(invoke_batch(str(jobs), "-o", str(out), "--backend", backend, "--address", address), code=1)
    assert says in line and time.monotonic() - started < 30
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({"jobs.csv", *(["scheduler"] if "scheduler" in address else [])})


def test_an_xlsx_that_unpacks_past_the_limit_is_refused_before_parsing(tmp_path, monkeypatch) -> None:
    """A zip bomb (a few kilobytes unpacking to gigabytes) hung `batch` past 300 s; the parts'
    unpacked sizes are summed from the zip directory first (sheets/xlsx_read.py; the limit is
    lowered here so that the bomb stays small)."""
    import zipfile

    from vramplan.sheets import xlsx_read

    monkeypatch.setattr(xlsx_read, "MAX_XLSX_UNPACKED_BYTES", 2**20)
    bomb = tmp_path / "jobs.xlsx"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("xl/worksheets/sheet1.xml", b"<a>" + b" " * (4 * 2**20) + b"</a>")
    assert bomb.stat().st_size < 10_000
    line = one_line_error(invoke_batch(str(bomb), "-o", str(tmp_path / "plans.csv")))
    assert "unpacks to 4 MiB, more than the 1 MiB" in line


@pytest.mark.slow
def test_a_port_that_is_not_a_ray_head_is_one_line_within_the_timeout(tmp_path) -> None:
    """A port that takes each TCP connection and closes it: ray.init retried past 150 s (it has no
    timeout); one that answers in another protocol printed a `gcs_client.cc ... Failed to get
    cluster ID` line a second above the error. Now a child process probes the connect within
    VRAMPLAN_CONNECT_TIMEOUT_S (batch/cluster.py probe_ray). Run as a process: Ray's core writes to
    file descriptor 2, below anything CliRunner captures."""
    import subprocess
    import sys
    import threading

    pytest.importorskip("ray")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except OSError:
                continue
            connection.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    jobs = write_csv(tmp_path / "jobs.csv", [{"id": "a", "model": "gpt2-124m", "seq_len": 512}])
    try:
        result = subprocess.run([sys.executable, "-m", "vramplan", "batch", str(jobs), "-o", str(tmp_path / "o.csv"),
                                 "--backend", "ray", "--address", f"127.0.0.1:{server.getsockname()[1]}", "-q"],
                                capture_output=True, text=True, timeout=300,
                                env={**os.environ, "VRAMPLAN_CONNECT_TIMEOUT_S": "15"})
    finally:
        stop.set()
        thread.join()
        server.close()
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "did not answer as a Ray head within 15 s" in result.stderr
