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
