"""`vramplan batch` on Ray and Dask local clusters gives byte-identical output to the local pool.

Skipped where the engines are not installed (pip install -e '.[test,ray,dask]' runs them). Each
test starts a local cluster on 127.0.0.1 (Dask ~3 s, Ray ~8 s on 2 cores) and stops it.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from pathlib import Path

import pytest
from helpers.cli import invoke
from helpers.sheets import write_csv

from vramplan.batch import worker as batch_worker
from vramplan.batch.run import BatchError, BatchOptions, run_batch

FAST = {"gpus": "h100-sxm-80gb", "max_gpus": "8"}
ROWS = (
    [{"id": f"r{i}", "model": model, "seq_len": str(seq), "objective": objective, **FAST}
     for i, (model, seq, objective) in enumerate(
         (m, s, o) for m in ("llama-3.1-8b", "gpt2-124m") for s in (512, 1024) for o in ("cost", "time", "hourly"))]
    + [{"id": "dup", "model": "llama-3.1-8b", "seq_len": "512", "objective": "cost", **FAST},
       {"id": "bad", "model": "llama-3.1-8b", "seq_len": "abc", "objective": "cost", **FAST},
       {"id": "=cmd|'/c calc'!A1", "model": "nope", "seq_len": "512", "objective": "cost", **FAST},
       {"id": "infeasible", "model": "llama-3.1-405b", "seq_len": "8192", "objective": "cost",
        "gpus": "a10g-24gb", "max_gpus": "8"}]
)


@pytest.fixture(scope="module")
def jobs(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("backends") / "jobs.csv"
    return write_csv(path, ROWS, ["id", "model", "seq_len", "objective", "gpus", "max_gpus"])


@pytest.fixture(scope="module")
def local_output(jobs) -> bytes:
    output = jobs.with_name("local.csv")
    result = invoke("batch", str(jobs), "-o", str(output), "--workers", "2", "-q")
    assert result.exit_code == 3, result.stderr
    return output.read_bytes()


@pytest.mark.parametrize("engine, module", [("dask", "distributed"),
                                            pytest.param("ray", "ray", marks=pytest.mark.slow)])  # Ray starts in ~5-8 s
def test_cluster_output_is_identical_to_local(jobs, local_output, engine, module):
    pytest.importorskip(module)
    output = jobs.with_name(f"{engine}.csv")
    result = invoke("batch", str(jobs), "-o", str(output), "--backend", engine, "--workers", "2", "-q")
    assert result.exit_code == 3, result.stderr
    assert output.read_bytes() == local_output


def test_dask_version_mismatch_is_reported_before_solving(catalogue, monkeypatch):
    pytest.importorskip("distributed")
    monkeypatch.setattr(batch_worker, "package_version", lambda: "9.9.9")  # this client only
    rows = [(0, ROWS[0])]
    with pytest.raises(BatchError, match=r"version mismatch: the workers run .*, this client runs 9\.9\.9"):
        list(run_batch(catalogue, rows, BatchOptions(backend="dask", workers=1)))


def test_dask_retries_the_rows_of_a_killed_worker(catalogue):
    pytest.importorskip("distributed")
    rows = list(enumerate(ROWS[:12]))
    expected = dict(run_batch(catalogue, rows, BatchOptions(backend="serial")))
    killed = []

    def kill_a_worker(done: int, total: int) -> None:
        if not killed and done >= 1:
            workers = [p for p in multiprocessing.active_children() if "Dask" in p.name or "Worker" in p.name
                       or "Spawn" in type(p).__name__ or "Fork" in type(p).__name__]
            if workers:
                os.kill(workers[0].pid, signal.SIGKILL)
                killed.append(workers[0].pid)

    answers = dict(run_batch(catalogue, rows, BatchOptions(backend="dask", workers=2, chunk_size=1),
                             progress=kill_a_worker))
    assert killed
    assert answers == expected


def test_missing_engine_is_one_clear_error(catalogue, monkeypatch, tmp_path, jobs):
    import builtins

    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    result = invoke("batch", str(jobs), "-o", str(tmp_path / "x.csv"), "--backend", "ray")
    assert result.exit_code == 1
    assert result.stderr.strip() == "error: the ray backend needs ray: pip install 'vramplan[ray]'"
    assert not (tmp_path / "x.csv.partial.jsonl").exists()  # stopped before anything ran
    with pytest.raises(BatchError, match=r"pip install 'vramplan\[ray\]'"):  # the Python API says the same
        list(run_batch(catalogue, [(0, ROWS[0])], BatchOptions(backend="ray")))


def test_dask_connects_to_an_existing_cluster_by_address_or_scheduler_file(jobs, local_output, tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        scheduler_file = tmp_path / "scheduler.json"
        client.write_scheduler_file(str(scheduler_file))
        for address in (cluster.scheduler_address, str(scheduler_file)):
            output = tmp_path / "plans.csv"
            result = invoke("batch", str(jobs), "-o", str(output), "--backend", "dask", "--address", address, "-q")
            assert result.exit_code == 3, result.stderr
            assert output.read_bytes() == local_output
        assert len(client.scheduler_info()["workers"]) == 2  # the user's cluster is left running
