"""`vramplan batch` (issue 4): the row schema, bad rows, spreadsheet safety, exit codes, dedupe,
worker loss, and nothing lost when the batch is killed, interrupted or resumed.

Good rows restrict the search (one GPU type, at most 8 GPUs) so that each solves in ~10 ms; the
kill/interrupt tests use unrestricted rows (~0.1 s each) so that there is a moment to strike.
"""

from __future__ import annotations

import csv
import io
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from vramplan.sheets import journal as batch_journal
from vramplan.batch import run as solver_batch
from vramplan.sheets import sheet_files as batch_sheet
from vramplan.batch import worker as batch_worker
from vramplan.batch.backends import ChunkDone, ChunkLost
from vramplan.sheets.rows import (
    ANSWER_COLUMNS,
    INPUT_COLUMNS,
    _Cells,
    check_columns,
    output_row,
    parse_row,
)
from vramplan.batch.run import BatchError, BatchOptions, check_versions, chunk_size, group_chunks, plan_jobs, run_batch
from vramplan.cli import main
from vramplan.models.catalogue.catalogue import Catalogue, load_catalogue
from vramplan.models.core.errors import VramplanError

REPO = Path(__file__).resolve().parent.parent
FAST = {"gpus": "h100-sxm-80gb", "max_gpus": "8"}
HEADER = ["id", "model", "seq_len", "objective", "gpus", "max_gpus", "global_batch", "tokens", "zero"]
INJECTIONS = ['=HYPERLINK("http://evil.example","x")', "+1", "-2+3", "@SUM(A1:A2)", "\tTAB", "\rCR"]
BAD_ROWS = [  # (id, changes to a good row, the text the error must contain)
    ("unknown-model", {"model": "llama-9000"}, "model='llama-9000'"),
    ("abc-seq", {"seq_len": "abc"}, "seq_len='abc'"),
    ("negative-seq", {"seq_len": "-5"}, "seq_len='-5'"),
    ("fastest", {"objective": "fastest"}, "objective='fastest'"),
    ("empty-model", {"model": ""}, "model=''"),
    ("zero-batch", {"global_batch": "0"}, "global_batch='0'"),
    ("huge-tokens", {"tokens": "1e400"}, "tokens='1e400'"),
]
GOOD = {"model": "llama-3.1-8b", "seq_len": "2048", "objective": "cost", **FAST}


def job(id_: str, **cells: str) -> dict[str, str]:
    return {"id": id_, **GOOD, **cells}


MIXED = (
    [job("ok"), job("ok-gpt2", model="gpt2-124m", seq_len="1024", objective="time"), job("pinned", zero="3"),
     job("infeasible", model="llama-3.1-405b", seq_len="8192", gpus="a10g-24gb")]
    + [job(id_, **changes) for id_, changes, _ in BAD_ROWS]
    + [job(text) for text in INJECTIONS]
    + [job("Zürich-日本"), job("ok")]
)


def write_csv(path: Path, rows: list[dict[str, str]], header: list[str] = HEADER) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)
    return path


def read_output(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


def run(*args: str):
    return CliRunner().invoke(main, ["batch", *args])


def answer_header(columns: list[str]) -> list[str]:
    return [f"plan_{c}" if c in columns else c for c in ANSWER_COLUMNS]


@pytest.fixture(scope="module")
def catalogue():
    return load_catalogue()


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mixed")
    jobs = write_csv(folder / "jobs.csv", MIXED)
    output = folder / "plans.csv"
    result = run(str(jobs), "-o", str(output), "--workers", "2")
    return result, output


# --- the schema -----------------------------------------------------------------------------------


def test_one_schema():
    assert tuple(_Cells.model_fields) == tuple(INPUT_COLUMNS)
    issue_columns = ["id", "model", "method", "seq_len", "global_batch", "tokens", "objective", "max_gpus", "gpus",
                     "providers", "budget_usd", "deadline_hours", "lora_rank", "optimizer", "accounting", "attention",
                     "capacity_fraction", "pricing", "zero", "recompute", "precision", "micro_batch", "offload",
                     "num_gpus"]
    assert set(issue_columns) <= set(INPUT_COLUMNS)


@pytest.mark.parametrize("columns, fragment", [
    (["model", "seq-len"], "column='seq-len': unknown column; did you mean 'seq_len'?"),
    (["model", "seq_len", "optimiser"], "column='optimiser': unknown column; did you mean 'optimizer'?"),
    (["model", "seq_len", "status"], "column='status': is an answer column"),
    (["model", "seq_len", "model"], "column='model': appears twice"),
    (["model"], "column='seq_len': is required"),
])
def test_header_errors(columns, fragment):
    with pytest.raises(VramplanError) as error:
        check_columns(columns)
    assert fragment in str(error.value)


def test_a_good_row_is_the_query_solve_would_build():
    query = parse_row({"id": "x", "model": " llama-3.1-8b ", "seq_len": "4096.0",
                       "gpus": "h100-sxm-80gb; a100-sxm-80gb",
                       "providers": "", "zero": "3", "micro_batch": 2.0, "method": "lora", "lora_rank": "8",
                       "tokens": "2e9", "budget_usd": None, "capacity_fraction": float("nan")})
    assert query.model == "llama-3.1-8b" and query.job.seq_len == 4096 and query.job.lora_rank == 8
    assert query.gpus == ("h100-sxm-80gb", "a100-sxm-80gb") and query.providers == ()
    assert query.pins.zero == 3 and query.pins.micro_batch == 2 and query.tokens == 2e9
    assert query.budget_usd is None and query.job.capacity_fraction == 0.9  # empty and NaN cells = default
    assert (query.top_k, query.pareto, query.engine) == (1, False, "cpsat")


@pytest.mark.parametrize("id_, changes, fragment", BAD_ROWS + [
    ("pin-over-limit", {"num_gpus": "1024"}, "num_gpus=1024"),
    ("bad-zero", {"zero": "5"}, "zero='5'"),
    ("fraction", {"capacity_fraction": "1.5"}, "capacity_fraction='1.5'"),
])
def test_bad_rows_name_the_field_and_the_value(catalogue, id_, changes, fragment):
    answers = dict(run_batch(catalogue, [(0, job(id_, **changes))], BatchOptions(backend="serial")))
    assert answers[0]["status"] == "error"
    assert fragment in answers[0]["error"]
    assert "\n" not in answers[0]["error"]


def test_output_row_of_an_infeasible_answer_explains(catalogue):
    from vramplan.solver.api import solve

    result = solve(catalogue, parse_row(job("x", model="llama-3.1-405b", seq_len="8192", gpus="a10g-24gb")))
    answer = output_row(result)
    assert answer["status"] == "infeasible" and answer["explanation"] and answer["gpu"] is None
    assert list(answer) == list(ANSWER_COLUMNS)


# --- execution: dedupe, chunks, versions, lost workers --------------------------------------------


def test_identical_jobs_are_solved_once(catalogue, monkeypatch):
    calls = []
    real_solve = batch_worker.solve

    def counting_solve(catalogue, query, **options):
        calls.append(query)
        return real_solve(catalogue, query, **options)

    monkeypatch.setattr(batch_worker, "solve", counting_solve)
    rows = [job("a"), job("b"), job("c", seq_len="2048.0"), job("d", seq_len="1024"), job("e", seq_len="abc"),
            job("f", seq_len="1024")]
    plan = plan_jobs(enumerate(rows))
    assert len(plan.jobs) == 2 and sorted(plan.rows_of_job) == [[0, 1, 2], [3, 5]] and [i for i, _ in plan.answered] == [4]
    answers = dict(run_batch(catalogue, list(enumerate(rows)), BatchOptions(backend="serial")))
    assert len(calls) == 2  # the bad row never reached the solver; duplicates were fanned out
    assert sorted(answers) == list(range(6))
    assert answers[0] == answers[1] == answers[2] and answers[3] == answers[5] and answers[0] != answers[3]


def test_group_chunks_keep_groups_whole():
    # Groups of 3, 20, 5, 1, 70 and 2 jobs in plan order; chunks of about 8, groups whole up to 32.
    groups = [g for g, n in (("a", 3), ("b", 20), ("c", 5), ("d", 1), ("e", 70), ("f", 2)) for _ in range(n)]
    chunks = group_chunks(groups, 8, 32)
    assert [job for chunk in chunks for job in chunk] == list(range(len(groups)))  # every job once, in order
    assert [len(chunk) for chunk in chunks] == [3, 20, 6, 23, 23, 24, 2]
    for chunk in chunks:
        members = {groups[job] for job in chunk}
        if groups[chunk[0]] != "e":  # only the 70-job group is larger than 32 and cut (in 3 near-equal pieces)
            assert all(groups.count(g) == sum(groups[job] == g for job in chunk) for g in members)
    assert group_chunks([], 8, 32) == []
    assert group_chunks(["x"] * 5, 2, 8) == [[0, 1, 2, 3, 4]]


def test_plan_jobs_records_each_jobs_group():
    rows = [{"model": m, "seq_len": s, "tokens": "1e9"} for m, s in
            (("llama-3.1-8b", 1024), ("gpt2-124m", 512), ("llama-3.1-8b", 1024), ("llama-3.1-8b", 2048))]
    rows[2]["objective"] = "time"
    plan = plan_jobs(enumerate(rows))
    assert len(plan.groups) == len(plan.jobs) == 4
    assert plan.groups == sorted(plan.groups)  # sorted, so that group_chunks sees each group in one run
    assert [g[0] for g in plan.groups] == ["gpt2-124m", "llama-3.1-8b", "llama-3.1-8b", "llama-3.1-8b"]
    assert plan.groups[1] == plan.groups[2] != plan.groups[3]  # same model and job; then another seq_len


def test_chunk_size_bounds():
    assert chunk_size(10, 2) == 1
    assert chunk_size(10_000, 2) == 64
    assert chunk_size(10_000, 2, maximum=16) == 16
    assert chunk_size(1_000, 2) == 63
    assert chunk_size(20, 2, minimum=8) == 8


def test_version_mismatch_is_reported(catalogue, monkeypatch):
    check_versions({"0.1.0"}, "0.1.0")
    with pytest.raises(BatchError, match=r"workers run 0\.0\.9, this client runs 0\.1\.0"):
        check_versions({"0.1.0", "0.0.9"}, "0.1.0")
    monkeypatch.setattr(batch_worker, "package_version", lambda: "9.9.9")  # here only, not in the pool
    with pytest.raises(BatchError, match="version mismatch"):
        list(run_batch(catalogue, [(0, job("a"))], BatchOptions(backend="local", workers=1)))


def test_a_killed_worker_process_is_replaced_and_its_rows_retried(catalogue):
    rows = [(i, job(str(i), seq_len=str(256 * (1 + i % 16)), objective=("cost", "time")[i // 16])) for i in range(32)]
    expected = dict(run_batch(catalogue, rows, BatchOptions(backend="serial")))
    killed = []

    def kill_one_worker(done: int, total: int) -> None:
        if not killed and done >= 4:
            victims = [p for p in multiprocessing.active_children() if "Fork" in type(p).__name__
                       or "Spawn" in type(p).__name__]
            if victims:
                os.kill(victims[0].pid, signal.SIGKILL)
                killed.append(victims[0].pid)

    answers = dict(run_batch(catalogue, rows, BatchOptions(backend="local", workers=2, chunk_size=2),
                             progress=kill_one_worker))
    assert killed, "no worker process was found to kill"
    assert answers == expected


class FakeBackend:
    """Chunks run in order; a chunk holding a job whose model is in `deadly` kills its 'worker'."""

    parallelism, min_chunk_size, max_chunk_size = 2, 1, 4

    def __init__(self, deadly: set[str]) -> None:
        self.deadly, self.queue, self.closed = deadly, [], None

    def worker_versions(self) -> set[str]:
        return set()

    def submit(self, chunk, jobs, retry=False):
        self.queue.insert(0, (chunk, jobs)) if retry else self.queue.append((chunk, jobs))

    def wait(self, timeout_s):
        if not self.queue:
            return []
        chunk, jobs = self.queue.pop(0)
        if any(job["model"] in self.deadly for job in jobs):
            return [ChunkLost(chunk, "killed")]
        return [ChunkDone(chunk, batch_worker.package_version(), [{"status": "optimal", "gpu": job["model"]}
                                                                  for job in jobs])]

    def close(self, cancel):
        self.closed = cancel


def test_a_row_that_kills_every_worker_is_isolated_and_only_it_fails(monkeypatch):
    backend = FakeBackend({"poison"})
    monkeypatch.setattr(solver_batch, "open_backend", lambda options, catalogue: backend)
    rows = [job(str(i), model="poison" if i == 5 else f"m{i}") for i in range(12)]
    answers = dict(run_batch(None, list(enumerate(rows)), BatchOptions(max_retries=2)))
    assert sorted(answers) == list(range(12))
    assert answers[5]["status"] == "error" and "died 3 times" in answers[5]["error"]
    assert all(answers[i] == {"status": "optimal", "gpu": f"m{i}"} for i in range(12) if i != 5)
    assert backend.closed is False


def test_workers_that_always_die_stop_the_batch(monkeypatch):
    backend = FakeBackend({f"m{i}" for i in range(12)})
    monkeypatch.setattr(solver_batch, "open_backend", lambda options, catalogue: backend)
    rows = [job(str(i), model=f"m{i}") for i in range(12)]
    with pytest.raises(BatchError, match="keep dying without finishing any work"):
        list(run_batch(None, list(enumerate(rows)), BatchOptions()))
    assert backend.closed is True


class _ExitOnUnpickle(Catalogue):
    """A real catalogue (the client reads it) that kills any process unpickling it."""

    def __reduce__(self):
        return (os._exit, (3,))


def test_local_workers_that_cannot_start_stop_the_batch():
    catalogue = _ExitOnUnpickle(**vars(load_catalogue()))
    with pytest.raises(BatchError, match="keep dying without finishing any work"):
        list(run_batch(catalogue, [(0, job("a"))], BatchOptions(backend="local", workers=1)))


# --- the CLI: one mixed spreadsheet ---------------------------------------------------------------


def test_mixed_batch_answers_every_row_in_order(mixed_run):
    result, output = mixed_run
    assert result.exit_code == 3, (result.stderr, result.exception)
    assert "Traceback" not in result.stderr and result.stdout == ""
    columns, rows = read_output(output)
    assert columns == HEADER + answer_header(HEADER)
    assert "plan_zero" in columns  # the pin column keeps its name; the plan's stage is plan_zero
    assert len(rows) == len(MIXED)
    for row, given in zip(rows, MIXED):
        for name in HEADER:
            assert batch_sheet.unneutralise(row[name]) == given.get(name, "")
    by_id = {row["id"]: row for row in rows}
    assert by_id["ok"]["status"] == "optimal" and by_id["ok"]["gpu"] == "h100-sxm-80gb"
    assert by_id["ok-gpt2"]["status"] == "optimal"
    assert by_id["pinned"]["plan_zero"] == "3"
    assert by_id["infeasible"]["status"] == "infeasible" and by_id["infeasible"]["explanation"]
    for id_, _, fragment in BAD_ROWS:
        assert by_id[id_]["status"] == "error" and fragment in by_id[id_]["error"], by_id[id_]
    assert rows[-1]["status"] == "optimal" and {k: v for k, v in rows[-1].items() if k != "id"} == {
        k: v for k, v in rows[0].items() if k != "id"}
    assert not batch_journal.journal_path(output).exists()


def test_csv_output_is_spreadsheet_safe(mixed_run):
    _, output = mixed_run
    raw = output.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf")  # UTF-8 BOM: Excel reads the non-ASCII text
    assert "Zürich-日本".encode() in raw
    columns, rows = read_output(output)
    ids = [row["id"] for row in rows]
    for text in INJECTIONS:
        assert "'" + text in ids
    assert all(not cell.startswith(batch_sheet.INJECTION_TRIGGERS) for row in rows for cell in row.values())
    import pandas

    frame = pandas.read_csv(output, encoding="utf-8-sig")
    for column in ("num_gpus", "dp", "grad_accum", "total_gib", "limit_gib", "tokens_per_s", "mfu", "hours",
                   "usd_per_hour", "usd_total"):
        assert frame[column].dtype.kind in "if", column
    assert frame["total_gib"].notna().sum() == len(MIXED) - len(BAD_ROWS) - 1


def test_every_row_solved_exits_0(tmp_path):
    jobs = write_csv(tmp_path / "jobs.csv", [job("a"), job("b", seq_len="1024")])
    result = run(str(jobs), "-o", str(tmp_path / "plans.csv"), "-q", "--workers", "1")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""  # -q: no summary; no terminal: no progress bar
    assert [row["status"] for row in read_output(tmp_path / "plans.csv")[1]] == ["optimal", "optimal"]


def test_unknown_column_stops_before_anything_runs(tmp_path):
    jobs = write_csv(tmp_path / "jobs.csv", [{"model": "llama-3.1-8b", "seq-len": "2048"}], ["model", "seq-len"])
    result = run(str(jobs), "-o", str(tmp_path / "plans.csv"))
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: column='seq-len': unknown column; did you mean 'seq_len'?"
    assert list(tmp_path.iterdir()) == [jobs]


def test_a_batch_that_cannot_run_exits_1(tmp_path, monkeypatch):
    jobs = write_csv(tmp_path / "jobs.csv", [job("a")])
    result = run(str(jobs), "-o", str(tmp_path / "missing" / "plans.csv"))
    assert result.exit_code == 1 and result.stderr.count("\n") == 1 and "cannot write" in result.stderr
    monkeypatch.setattr(batch_worker, "package_version", lambda: "9.9.9")
    result = run(str(jobs), "-o", str(tmp_path / "plans.csv"), "--workers", "1")
    assert result.exit_code == 1 and "version mismatch" in result.stderr


# --- XLSX, Parquet, JSON lines --------------------------------------------------------------------


def test_xlsx_output_is_neutralised_and_numeric(tmp_path, mixed_run):
    openpyxl = pytest.importorskip("openpyxl")
    jobs = write_csv(tmp_path / "jobs.csv", MIXED)
    output = tmp_path / "plans.xlsx"
    result = run(str(jobs), "-o", str(output), "--workers", "2", "-q")
    assert result.exit_code == 3, result.stderr
    sheet = openpyxl.load_workbook(output).active
    header = [cell.value for cell in sheet[1]]
    assert header == HEADER + answer_header(HEADER)
    cells = {row[0].value: row for row in sheet.iter_rows(min_row=2)}
    for text in INJECTIONS:
        cell = cells["'" + text.replace("\r", "\n")][0]  # XML reads a stored CR back as LF
        assert cell.data_type == "s" and cell.value.startswith("'")
    assert all(cell.data_type != "f" for row in sheet.iter_rows() for cell in row)  # no formula anywhere
    ok = cells["ok"]
    assert ok[header.index("num_gpus")].data_type == "n" and isinstance(ok[header.index("usd_total")].value, float)
    _, csv_rows = read_output(mixed_run[1])
    assert sheet.max_row - 1 == len(csv_rows)


def test_xlsx_and_parquet_input_give_the_same_answers(tmp_path):
    pytest.importorskip("openpyxl")
    pytest.importorskip("pyarrow")
    import pandas

    rows = [job("a"), job("b", seq_len="1024"), job("c", seq_len="abc")]
    frame = pandas.DataFrame(rows)
    frame["seq_len"] = [2048, 1024, "abc"]  # numbers stay numbers in a spreadsheet
    frame.to_excel(tmp_path / "jobs.xlsx", index=False)
    frame.astype(str).to_parquet(tmp_path / "jobs.parquet", index=False)
    write_csv(tmp_path / "jobs.csv", rows)
    statuses = {}
    for name in ("jobs.csv", "jobs.xlsx", "jobs.parquet"):
        output = tmp_path / f"{name}.out.parquet"
        result = run(str(tmp_path / name), "-o", str(output), "-q", "--workers", "1")
        assert result.exit_code == 3, result.stderr
        plans = pandas.read_parquet(output)
        assert list(plans.columns[: len(frame.columns)]) == list(frame.columns) and len(plans) == 3
        assert plans["num_gpus"].dtype.name == "Int64" and plans["usd_total"].dtype.kind == "f"
        statuses[name] = plans[["status", "gpu", "usd_total"]].astype(str).values.tolist()
    assert statuses["jobs.csv"] == statuses["jobs.xlsx"] == statuses["jobs.parquet"]
    assert [s[0] for s in statuses["jobs.csv"]] == ["optimal", "optimal", "error"]


def test_jsonl_output(tmp_path):
    jobs = write_csv(tmp_path / "jobs.csv", [job("=1+1"), job("b", seq_len="abc")])
    result = run(str(jobs), "-o", str(tmp_path / "plans.jsonl"), "-q", "--workers", "1")
    assert result.exit_code == 3
    records = [json.loads(line) for line in (tmp_path / "plans.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in records] == ["=1+1", "b"]  # JSON is not a spreadsheet: text as given
    assert records[0]["status"] == "optimal" and isinstance(records[0]["num_gpus"], int)


# --- nothing lost: resume, kill, interrupt --------------------------------------------------------


def test_resume_reuses_answered_rows_and_solves_only_the_rest(tmp_path):
    rows = [job(str(i), seq_len=str(512 * (i + 1))) for i in range(4)] + [job("bad", seq_len="abc")]
    jobs = write_csv(tmp_path / "jobs.csv", rows)
    output = tmp_path / "plans.csv"
    assert run(str(jobs), "-o", str(output), "--workers", "1").exit_code == 3
    first = output.read_bytes()
    again = run(str(jobs), "-o", str(output), "--resume", "--workers", "1")
    assert again.exit_code == 3 and "5 reused" in again.stderr
    assert output.read_bytes() == first
    rows[1] = job("1", seq_len="4096")  # an edited row is a new job
    rows.append(job("new", seq_len="1024"))
    write_csv(jobs, rows)
    third = run(str(jobs), "-o", str(output), "--resume", "--workers", "1")
    assert third.exit_code == 3 and "4 reused" in third.stderr
    _, plans = read_output(output)
    assert [p["id"] for p in plans] == ["0", "1", "2", "3", "bad", "new"] and plans[1]["seq_len"] == "4096"
    assert all(p["status"] in ("optimal", "error") for p in plans)


@pytest.mark.parametrize("suffix, module", [(".xlsx", "openpyxl"), (".parquet", "pyarrow"), (".jsonl", "json")])
def test_resume_reads_back_every_output_format(tmp_path, suffix, module):
    pytest.importorskip(module)
    rows = [job("=a", seq_len="1024"), job("b", seq_len="abc"), job("c", seq_len="2048")]
    jobs = write_csv(tmp_path / "jobs.csv", rows)
    output = tmp_path / f"plans{suffix}"
    assert run(str(jobs), "-o", str(output), "--workers", "1").exit_code == 3
    first = output.read_bytes() if suffix != ".xlsx" else None
    again = run(str(jobs), "-o", str(output), "--resume", "--workers", "1")
    assert again.exit_code == 3 and "3 reused" in again.stderr, again.stderr
    if first is not None:
        assert output.read_bytes() == first


SLOW_ROWS = [{"id": str(i), "model": model, "seq_len": str(seq), "objective": objective}
             for i, (model, seq, objective) in enumerate(
                 (m, s, o) for m in ("llama-3.1-8b", "mistral-7b", "qwen2.5-7b") for s in (1024, 2048, 4096, 8192)
                 for o in ("cost", "time", "throughput"))]


def start_batch(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen, Path]:
    jobs = write_csv(tmp_path / "jobs.csv", SLOW_ROWS, ["id", "model", "seq_len", "objective"])
    output = tmp_path / "plans.csv"
    command = [sys.executable, "-c", "from cli import main; main()", "batch", str(jobs), "-o", str(output),
               "--workers", "1", "--chunk-size", "1", *extra]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return process, output


def wait_for_rows(journal: Path, process: subprocess.Popen, count: int, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if journal.exists() and journal.read_text(encoding="utf-8").count("\n") > count:
            return
        assert process.poll() is None, process.communicate()
        time.sleep(0.02)
    raise AssertionError("no rows were written in time")


def journal_rows(journal: Path) -> dict[int, dict]:
    _, entries = batch_journal.read_journal(journal)
    return {entry["row"]: entry["answer"] for entry in entries}


def test_a_killed_batch_keeps_every_completed_row_and_resume_finishes_it(tmp_path):
    process, output = start_batch(tmp_path)
    journal = batch_journal.journal_path(output)
    wait_for_rows(journal, process, 4)
    process.kill()  # SIGKILL: no chance to clean up
    process.wait()
    kept = journal_rows(journal)
    assert len(kept) >= 4 and len(kept) < len(SLOW_ROWS)
    assert all(answer["status"] == "optimal" for answer in kept.values())
    result = run(str(tmp_path / "jobs.csv"), "-o", str(output), "--resume", "--workers", "2")
    assert result.exit_code == 0, result.stderr
    assert f"{len(kept)} reused" in result.stderr  # only the missing rows were solved
    _, plans = read_output(output)
    assert [p["id"] for p in plans] == [r["id"] for r in SLOW_ROWS]
    assert all(p["status"] == "optimal" for p in plans)
    for row, answer in kept.items():  # what survived the kill is exactly what a full solve gives
        assert plans[row]["usd_total"] == repr(answer["usd_total"]) and plans[row]["gpu"] == answer["gpu"]
    assert not journal.exists()


def test_ctrl_c_writes_finished_rows_and_exits_130(tmp_path):
    process, output = start_batch(tmp_path)
    journal = batch_journal.journal_path(output)
    wait_for_rows(journal, process, 3)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "--resume" in stderr
    _, plans = read_output(output)
    assert [p["id"] for p in plans] == [r["id"] for r in SLOW_ROWS]  # every row, in order
    finished = [p for p in plans if p["status"]]
    assert len(finished) >= 3 and len(finished) < len(SLOW_ROWS)
    assert all(p["status"] == "optimal" for p in finished)
    assert all("--resume" in p["error"] for p in plans if not p["status"])
    assert journal.exists()
    result = run(str(tmp_path / "jobs.csv"), "-o", str(output), "--resume", "--workers", "2")
    assert result.exit_code == 0, result.stderr
    assert f"{len(finished)} reused" in result.stderr
    _, resumed = read_output(output)
    assert [p["id"] for p in resumed] == [r["id"] for r in SLOW_ROWS]
    assert all(p["status"] == "optimal" for p in resumed)
    assert [p for p in resumed if p["id"] in {f["id"] for f in finished}] == finished


def test_a_torn_journal_line_is_ignored_and_overwritten(tmp_path):
    path = tmp_path / "plans.csv.partial.jsonl"
    journal = batch_journal.Journal(path, fresh=True, trust_output=False)
    journal.append(0, "k0", {"status": "optimal"})
    journal.close()
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"row": 1, "key": "k1", "ans')  # killed mid-write
    assert list(journal_rows(path)) == [0]
    journal = batch_journal.Journal(path, fresh=False, trust_output=False)
    journal.append(2, "k2", {"status": "error"})
    journal.close()
    assert list(journal_rows(path)) == [0, 2]


@pytest.mark.parametrize("text, safe", [
    ("=1+1", "'=1+1"), ("+1", "'+1"), ("-2+3", "'-2+3"), ("@SUM(A1)", "'@SUM(A1)"), ("\tx", "'\tx"),
    ("\rx", "'\rx"), ("-5", "'-5"), ("llama", "llama"), ("", ""), ("'=x", "'=x"),
])
def test_neutralise(text, safe):
    assert batch_sheet.neutralise(text) == safe
    assert batch_journal.canonical(batch_sheet.neutralise(text)) == batch_journal.canonical(text)


def test_csv_cells_keep_numbers_numeric():
    buffer = io.StringIO()
    csv.writer(buffer).writerow([batch_sheet._csv_cell(v) for v in (-5, -2.5, None, True, "-5")])
    assert buffer.getvalue().strip() == "-5,-2.5,,true,'-5"
