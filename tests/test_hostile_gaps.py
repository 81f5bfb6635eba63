"""Hostile inputs that a second review of hostile input found still failing after the first round of fixes.

- batch removed an input that was the output's lock file or one of its temporary names, and
  replaced a config.json that a `model` cell of the sheet names;
- a full disk while closing the journal was an `internal error: OSError` naming no file;
- a Ctrl-C (SIGINT to the whole foreground process group, as a terminal sends it) killed every
  worker once it had run one CP-SAT solve (CP-SAT leaves SIGINT at its default action), printing
  "a batch worker process died; restarting the pool", and a Ctrl-C while the forkserver was still
  importing the solver printed a KeyboardInterrupt traceback;
- an unreachable hub printed huggingface_hub's retry warnings (12 stderr lines);
- `--tokens 1 --budget-usd 1e12` overflowed CP-SAT's int64 constants (TypeError, exit 1) and
  `--tokens 1e-300` with a budget made an infinite step bound (OverflowError, exit 1).
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.cli import invoke, invoke_batch
from helpers.paths import CATALOGUE_DIR, HF_CONFIGS, REPO
from helpers.sheets import write_csv

from vramplan.sheets import journal as batch_journal
from vramplan.sheets import output_file

ROW = "model,seq_len,gpus,max_gpus\nllama-3.1-8b,2048,h100-sxm-80gb,8\n"



def one_line(result) -> str:
    assert result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.output
    return result.stderr


@pytest.mark.parametrize("name", [f".plans.csv{output_file.LOCK_MARK}", f".plans.csv{output_file.TEMP_MARK}12345"])
def test_an_input_that_the_run_would_remove_beside_the_output_is_refused(tmp_path, name):
    jobs = tmp_path / name
    jobs.write_text(ROW, encoding="utf-8")
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"), quiet=True)
    assert result.exit_code == 2
    assert "write to another file" in one_line(result)
    assert jobs.read_text(encoding="utf-8") == ROW  # before: deleted by the lock release / stale sweep


def test_a_catalogue_that_is_the_outputs_lock_file_is_refused(tmp_path):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(ROW, encoding="utf-8")
    lock = tmp_path / f".plans.csv{output_file.LOCK_MARK}"
    shutil.copy(CATALOGUE_DIR / "gpus.csv", lock)
    original = lock.read_bytes()
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"), "--gpus-csv", str(lock), quiet=True)
    assert result.exit_code == 2, result.stderr
    one_line(result)
    assert lock.read_bytes() == original


@pytest.mark.parametrize("cell", ["cfg.json", "sub"])
def test_an_output_that_is_a_config_file_of_the_sheet_is_refused(tmp_path, cell):
    config = tmp_path / "cfg.json" if cell == "cfg.json" else tmp_path / "sub" / "config.json"
    config.parent.mkdir(exist_ok=True)
    shutil.copy(HF_CONFIGS / "olmo-2-13b.json", config)
    original = config.read_bytes()
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(f"model,seq_len,gpus,max_gpus\n{cell},512,a10g-24gb,8\n", encoding="utf-8")
    result = invoke_batch(str(jobs), "-o", str(config), quiet=True)
    assert result.exit_code == 2
    assert "is the model config file itself" in one_line(result)
    assert config.read_bytes() == original  # before: replaced by the plans (exit 0)


def test_a_catalogue_name_is_not_taken_for_a_file_the_sheet_reads(tmp_path):
    (tmp_path / "llama-3.1-8b").write_text("not a config", encoding="utf-8")
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(ROW, encoding="utf-8")
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"), quiet=True)
    assert result.exit_code == 0, result.stderr


class FullDisk:
    """A journal handle on a disk that fills after `room` flushes: then every flush (and close,
    which flushes the buffer again) fails with ENOSPC."""

    closed = False

    def __init__(self, room: int = 0) -> None:
        self.room = room

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        self.room -= 1
        if self.room < 0:
            raise OSError(errno.ENOSPC, "No space left on device")

    def fileno(self) -> int:
        return 0

    def close(self) -> None:
        self.closed = True
        raise OSError(errno.ENOSPC, "No space left on device")


def test_closing_a_journal_on_a_full_disk_is_quiet(tmp_path):
    journal = batch_journal.Journal(tmp_path / "plans.csv.partial.jsonl", fresh=True, trust_output=False)
    journal._handle.close()
    journal._handle = FullDisk()
    journal.close()  # before: OSError escaped, "internal error: OSError: [Errno 28] ..." with no file name
    assert journal._handle.closed


def test_a_full_disk_during_a_batch_names_the_journal(tmp_path, monkeypatch):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(ROW, encoding="utf-8")
    real_open = Path.open

    def open_full(self, mode="r", *args, **kwargs):
        handle = real_open(self, mode, *args, **kwargs)
        if self.name.endswith(batch_journal.JOURNAL_SUFFIX) and any(m in mode for m in "wax"):
            handle.close()
            return FullDisk(room=1)  # the header fits, the first row does not
        return handle

    monkeypatch.setattr(Path, "open", open_full)
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"), quiet=True)
    assert result.exit_code == 1
    assert "journal=" in one_line(result) and "No space left on device" in result.stderr


def _ctrl_c_run(tmp_path: Path, rows: int, ready) -> subprocess.CompletedProcess:
    """A batch in its own session; SIGINT to its whole process group (what a terminal's Ctrl-C
    does) once `ready(jobs, journal)` is true."""
    jobs = write_csv(tmp_path / "jobs.csv", [["llama-3.1-8b", 512 + 8 * i, "time" if i % 2 else "cost"] for i in range(rows)],
                     ["model", "seq_len", "objective"])
    output = tmp_path / "plans.csv"
    process = subprocess.Popen([sys.executable, "-m", "vramplan", "batch", str(jobs), "-o", str(output),
                                "--workers", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None and not ready(process, output):
        time.sleep(0.05)
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
    stdout, stderr = process.communicate(timeout=120)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def _journal_rows(output: Path) -> int:
    journal = output.with_name(output.name + batch_journal.JOURNAL_SUFFIX)
    return journal.read_text(encoding="utf-8").count("\n") - 1 if journal.exists() else 0


def test_ctrl_c_after_the_first_solves_stops_without_losing_workers(tmp_path):
    done = _ctrl_c_run(tmp_path, 200, lambda process, output: _journal_rows(output) >= 1)
    assert done.returncode == 130, done.stderr
    assert "worker process died" not in done.stderr  # before: every worker died of the SIGINT
    assert "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 2, done.stderr  # the summary and "interrupted: ..."


def _forkserver_started(process: subprocess.Popen, output: Path) -> bool:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError):
                continue
            if ppid == process.pid and b"forkserver" in cmdline:
                return True
    return False


def _forkserver_importing(process: subprocess.Popen, output: Path) -> bool:
    """The forkserver is up and (for the next second or two) importing the solver. The short wait
    keeps the signal out of the milliseconds in which the batch process itself ignores Ctrl-C
    while spawning it (batch/pool.start_helpers_ignoring_ctrl_c)."""
    if not _forkserver_started(process, output):
        return False
    time.sleep(0.2)
    return True


def test_ctrl_c_while_the_workers_start_prints_no_traceback(tmp_path):
    done = _ctrl_c_run(tmp_path, 200, _forkserver_importing)
    assert done.returncode == 130, done.stderr
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) <= 2, done.stderr


def test_an_unreachable_hub_is_one_line(monkeypatch, caplog):
    huggingface_hub = pytest.importorskip("huggingface_hub")
    from vramplan.models.catalogue.catalogue import hf_hub
    def unreachable(repo_id, filename, **kwargs):
        for attempt in range(5):  # what huggingface_hub's http_backoff logs before it gives up
            logging.getLogger("huggingface_hub.utils._http").warning("'Name or service not known' thrown")
            logging.getLogger("huggingface_hub.utils._http").warning(f"Retrying in 1s [Retry {attempt + 1}/5].")
        raise OSError("unreachable")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("VRAMPLAN_DEBUG", raising=False)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", unreachable)
    with caplog.at_level(logging.DEBUG), pytest.raises(Exception, match="cannot fetch config.json"):
        hf_hub.hub_config_path("org/name")
    assert [r.getMessage() for r in caplog.records if r.name.startswith("huggingface_hub")] == []


def solve(*args: str):
    """Every offering: the overflow was in the exclusions between same-hardware offerings."""
    return invoke("solve", "--model", "gpt2-124m", "--seq-len", "1", "--global-batch", "1", "--time-limit", "5", *args)


@pytest.mark.parametrize("engine", ["cpsat", "brute"])
def test_a_huge_budget_over_one_token_solves(engine):
    result = solve("--engine", engine, "--tokens", "1", "--budget-usd", "1e12")
    assert result.exit_code == 0, result.output  # before: internal error: TypeError (CP-SAT int64)
    assert result.stderr == ""


@pytest.mark.parametrize("tokens", ["1e-300", "0.5"])
def test_fewer_than_one_token_is_outside_the_domain(tokens):
    result = solve("--tokens", tokens, "--budget-usd", "1e12")
    assert result.exit_code == 2  # before: internal error: OverflowError (an infinite step bound)
    assert f"tokens={float(tokens)!r}: out of range: must be >= 1" in one_line(result)


def test_a_fifo_output_without_a_reader_is_one_line_not_a_hang(tmp_path, monkeypatch):
    monkeypatch.setattr(output_file, "FIFO_READER_WAIT_S", 0.5)
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(ROW, encoding="utf-8")
    fifo = tmp_path / "plans.csv"
    os.mkfifo(fifo)
    started = time.monotonic()
    result = invoke_batch(str(jobs), "-o", str(fifo), quiet=True)  # before: blocked in open() forever, every row solved
    assert result.exit_code == 1
    assert "no process is reading this FIFO" in one_line(result)
    assert time.monotonic() - started < 60


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
@pytest.mark.parametrize("resume", [False, True])
def test_a_journal_path_that_is_not_a_regular_file_is_never_opened(tmp_path, kind, resume):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(ROW, encoding="utf-8")
    journal = tmp_path / "plans.csv.partial.jsonl"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me", encoding="utf-8")
    if kind == "fifo":
        os.mkfifo(journal)  # before: open() for writing blocked forever
    else:
        journal.symlink_to(victim)  # before: a fresh run truncated the file the link points to
    args = [str(jobs), "-o", str(tmp_path / "plans.csv")] + (["--resume"] if resume else [])
    done = subprocess.run([sys.executable, "-m", "vramplan", "batch", *args, "--workers", "1", "-q"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and "is not a regular file" in done.stderr, done.stderr
    assert victim.read_text(encoding="utf-8") == "keep me"


def test_the_parquet_extra_excludes_pyarrow_14_0_0():
    import re
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    floors = [re.fullmatch(r"pyarrow>=([0-9.]+)", spec) for spec in extras["parquet"] if spec.startswith("pyarrow")]
    assert floors and floors[0], extras["parquet"]
    assert tuple(int(part) for part in floors[0].group(1).split(".")) >= (14, 0, 1)  # CVE-2023-47248


def test_the_readme_says_the_cluster_address_must_be_trusted():
    text = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert "`--address` must point at a cluster you trust" in text and "unpickle" in text


def test_an_unreadable_inventory_is_named_as_the_inventory(tmp_path) -> None:
    """batch/sheet.read_table named every unreadable file `jobs=`, so an empty fleet inventory
    was reported as the jobs file."""
    from vramplan.fleet.sheet import read_inventory
    from vramplan.models.core.errors import VramplanError

    empty = tmp_path / "inventory.csv"
    empty.write_text("")
    with pytest.raises(VramplanError) as error:
        read_inventory(empty, "csv")
    assert str(error.value).startswith("inventory=")


def test_a_config_that_fails_a_whole_model_check_is_one_clean_line(tmp_path) -> None:
    """The whole-model check's own message, not pydantic's ': : Value error, ...' wrapper."""
    from vramplan.models.catalogue.hf_config import architecture_from_config
    from vramplan.models.core.errors import VramplanError

    config = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 7,
              "num_key_value_heads": 40, "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 128}
    with pytest.raises(VramplanError) as error:
        architecture_from_config(config, name="cfg", source="cfg.json")
    assert str(error.value) == "model='cfg.json': num_kv_heads=40: must divide num_attention_heads=7"


@pytest.mark.parametrize(("cell", "gpus"), [("1e3", 1000), ("64", 64), ("64.0", 64)])
def test_inventory_counts_follow_the_sheet_grammar(catalogue, tmp_path, cell, gpus) -> None:
    """The fleet inventory's num_gpus reads like every other count (README: Input rules)."""
    from vramplan.fleet.sheet import _window

    window = _window(catalogue, "aws/p5.48xlarge", {"num_gpus": cell}, None, {})
    assert window.num_gpus == gpus


@pytest.mark.parametrize("cell", ["1_000", "true", "2.5", "\u0661\u0662"])
def test_inventory_counts_refuse_what_the_sheet_refuses(catalogue, cell) -> None:
    from vramplan.fleet.sheet import _window
    from vramplan.models.core.errors import VramplanError

    with pytest.raises(VramplanError) as error:
        _window(catalogue, "aws/p5.48xlarge", {"num_gpus": cell}, None, {})
    assert str(error.value).startswith("num_gpus=")

