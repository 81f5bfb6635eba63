"""Running a batch (batch/run.py): identical jobs are solved once, chunks keep a model's jobs
together, workers and client must run one version, and a lost worker's rows are retried (a row
that kills every worker fails alone; workers that never finish anything stop the batch)."""

from __future__ import annotations

import multiprocessing
import os
import signal

import pytest
from helpers.sheets import job

from vramplan.batch import run as solver_batch
from vramplan.batch import worker as batch_worker
from vramplan.batch.backends import ChunkDone, ChunkLost
from vramplan.batch.run import BatchError, BatchOptions, check_versions, chunk_size, group_chunks, plan_jobs, run_batch
from vramplan.models.catalogue.catalogue import Catalogue


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


def test_a_row_that_kills_every_worker_is_isolated_and_only_it_fails(monkeypatch, catalogue):
    backend = FakeBackend({"poison"})
    monkeypatch.setattr(solver_batch, "open_backend", lambda options, catalogue: backend)
    monkeypatch.setattr(solver_batch, "_read_model_file", lambda *args: None)  # the fake models are no config files
    rows = [job(str(i), model="poison" if i == 5 else f"m{i}") for i in range(12)]
    answers = dict(run_batch(catalogue, list(enumerate(rows)), BatchOptions(max_retries=2)))
    assert sorted(answers) == list(range(12))
    assert answers[5]["status"] == "error" and "died 3 times" in answers[5]["error"]
    assert all(answers[i] == {"status": "optimal", "gpu": f"m{i}"} for i in range(12) if i != 5)
    assert backend.closed is False


def test_workers_that_always_die_stop_the_batch(monkeypatch, catalogue):
    backend = FakeBackend({f"m{i}" for i in range(12)})
    monkeypatch.setattr(solver_batch, "open_backend", lambda options, catalogue: backend)
    monkeypatch.setattr(solver_batch, "_read_model_file", lambda *args: None)  # the fake models are no config files
    rows = [job(str(i), model=f"m{i}") for i in range(12)]
    with pytest.raises(BatchError, match="keep dying without finishing any work"):
        list(run_batch(catalogue, list(enumerate(rows)), BatchOptions()))
    assert backend.closed is True


class _ExitOnUnpickle(Catalogue):
    """A real catalogue (the client reads it) that kills any process unpickling it."""

    def __reduce__(self):
        return (os._exit, (3,))


def test_local_workers_that_cannot_start_stop_the_batch(catalogue):
    deadly = _ExitOnUnpickle(**vars(catalogue))
    with pytest.raises(BatchError, match="keep dying without finishing any work"):
        list(run_batch(deadly, [(0, job("a"))], BatchOptions(backend="local", workers=1)))



@pytest.mark.parametrize(("options", "field"), [
    ({"chunk_size": -1}, "chunk_size"),  # range(0, n, -1) submitted no chunk: the batch returned no answer
    ({"chunk_size": 2.5}, "chunk_size"), ({"workers": -1}, "workers"), ({"workers": "2"}, "workers"),
    ({"workers": True}, "workers"), ({"max_retries": "x"}, "max_retries"), ({"backend": "spark"}, "backend"),
])
def test_batch_options_out_of_the_commands_domains_are_one_line_naming_the_field(options, field):
    with pytest.raises(ValueError, match=rf"^{field}="):
        BatchOptions(**options)


def test_a_malformed_row_is_its_own_error_and_a_malformed_item_names_the_call(catalogue):
    rows = [(0, "llama-3.1-8b"), (1, None), (2, {"model": "llama-3.1-8b", 5: 1}), (3, {"model": "nope"})]
    answers = dict(run_batch(catalogue, rows, BatchOptions(backend="serial")))
    assert sorted(answers) == [0, 1, 2, 3] and all(a["status"] == "error" for a in answers.values())
    assert answers[0]["error"].startswith("row='llama-3.1-8b': must be a mapping")
    with pytest.raises(ValueError, match="not a \\(row index, row\\) pair"):
        list(run_batch(catalogue, [{"model": "llama-3.1-8b"}], BatchOptions(backend="serial")))
