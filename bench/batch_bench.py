"""Benchmark `vramplan batch`: N varied jobs over the catalogue, solved end to end through the CLI.

    python bench/batch_bench.py --rows 10000 [--workers 2] [--backend local|ray|dask] [--json]

The jobs vary model, sequence length, method, objective, allowed GPUs, GPU limit, token budget and
some pins (seeded, so a run is repeatable); some are infeasible, as in a real sheet, and get an
explanation. The timing covers everything the command does: reading the CSV, starting the
workers or the cluster, solving, the journal and writing the output. The last line of --json
output is one JSON object with rows, seconds, workers and backend (and more).
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from vramplan.batch.backends import default_workers
from vramplan.cli import main
from vramplan.models.catalogue.catalogue import load_catalogue
from vramplan.sheets.rows import parse_row

COLUMNS = ["id", "model", "method", "seq_len", "objective", "gpus", "max_gpus", "tokens", "zero", "recompute"]


def generate_jobs(num_rows: int, seed: int = 0, small: bool = False) -> list[dict[str, str]]:
    """Varied jobs; `small` restricts every row to one GPU type and at most 8 GPUs (a tiny search
    space, ~5-10 ms a solve), to measure what the batch machinery costs per row."""
    catalogue = load_catalogue()
    rng = random.Random(seed)
    models, gpus = sorted(catalogue.architectures), sorted(catalogue.gpus)
    rows = []
    for i in range(num_rows):
        restricted = small or rng.random() < 0.5
        row = {
            "id": f"job-{i}",
            "model": rng.choice(models),
            "method": rng.choices(["full", "lora", "qlora"], weights=[6, 3, 1])[0],
            "seq_len": str(rng.choice([512, 1024, 2048, 4096, 8192])),
            "objective": rng.choice(["cost", "time", "throughput", "hourly"]),
            "gpus": ";".join(rng.sample(gpus, rng.choice([1, 2]))) if restricted else "",
            "max_gpus": str(rng.choice([8, 16, 64, 256, 512])),
            "tokens": rng.choice(["1e8", "1e9", "1e10"]),
            "zero": str(rng.choice([0, 1, 2, 3])) if rng.random() < 0.1 else "",
            "recompute": rng.choice(["none", "selective", "full"]) if rng.random() < 0.1 else "",
        }
        if small:
            row.update(gpus=rng.choice(["h100-sxm-80gb", "b200-180gb", "mi300x-192gb"]), max_gpus="8",
                       model=rng.choice(["llama-3.1-8b", "mistral-7b", "qwen2.5-7b", "gpt2-124m"]),
                       seq_len=rng.choice(["512", "1024"]), tokens=f"{rng.randint(1, 10**6)}e4")
        rows.append(row)
    return rows


def every_group(rows: list[dict[str, str]], every: int) -> list[dict[str, str]]:
    """The rows of every `every`-th (model, job, global batch) group, in the order batch sorts
    groups (model, then method, then sequence length: 3 x 5 groups a model). A step sharing a
    factor with 15 keeps one sequence length (every 5th: 1,024 tokens only) or one method and
    length (every 30th), so samples that stand for the mix use a step coprime to 15 (7: 1,420
    rows, every length and method). Rows that do not parse are dropped."""
    keyed = []
    for row in rows:
        try:
            query = parse_row(row)
        except ValueError:
            continue
        keyed.append(((query.model, query.job.model_dump_json(), query.effective_global_batch), row))
    kept = set(sorted({key for key, _ in keyed})[::every])
    return [row for key, row in keyed if key in kept]


def unique_jobs(rows: list[dict[str, str]]) -> int:
    keys = set()
    for row in rows:
        try:
            keys.add(parse_row(row).model_dump_json())
        except ValueError:
            keys.add(json.dumps(row, sort_keys=True))
    return len(keys)


def run(rows: list[dict[str, str]], workers: int, backend: str, chunk: int | None) -> tuple[float, int, Counter]:
    with tempfile.TemporaryDirectory() as folder:
        jobs, output = Path(folder) / "jobs.csv", Path(folder) / "plans.csv"
        with jobs.open("w", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
        args = ["batch", str(jobs), "-o", str(output), "--workers", str(workers), "--backend", backend, "-q"]
        if chunk:
            args += ["--chunk-size", str(chunk)]
        started = time.perf_counter()
        code = main(args, standalone_mode=False)
        seconds = time.perf_counter() - started
        with output.open(encoding="utf-8-sig", newline="") as handle:
            statuses = Counter(row["status"] for row in csv.DictReader(handle))
    return seconds, code, statuses


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument("--backend", choices=["local", "ray", "dask"], default="local")
    parser.add_argument("--chunk-size", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--small", action="store_true", help="Tiny search spaces: measures the batch overhead.")
    parser.add_argument("--every-group", type=int, default=1, metavar="N",
                        help="Keep the rows of every N-th (model, job, global batch) group of the mix "
                             "(N coprime to 15, e.g. 7, for a sample with every method and length).")
    parser.add_argument("--json", action="store_true", help="End with one JSON line.")
    parser.add_argument("--profile", action="store_true",
                        help="cProfile the rows in this process (serial backend, no CLI) and print the top sinks.")
    parser.add_argument("--worker-cpu", action="store_true",
                        help="Solve the rows in this process as one batch worker does (one table memo, the "
                             "collector paced and frozen per row) and print its CPU seconds: the rows' own cost, "
                             "without the pool's start-up or the machine's other load.")
    return parser.parse_args(argv)


def worker_cpu(rows: list[dict[str, str]]) -> float:
    """CPU seconds of solving `rows` in this process the way a local worker does: the serial backend
    with the worker's collector pacing (batch/gc_pacing.py), which the serial backend leaves off."""
    from vramplan.batch import backends, worker
    from vramplan.batch import run as batch_run

    class WorkerLike(backends.SerialBackend):
        def wait(self, timeout_s: float) -> list:
            if not self._queue:
                return []
            chunk, jobs = self._queue.pop(0)
            version, answers = worker.solve_chunk(self._catalogue, jobs, pace_gc=True)
            return [backends.ChunkDone(chunk, version, answers)]

    catalogue = load_catalogue()
    opened = batch_run.open_backend
    batch_run.open_backend = lambda options, catalogue: WorkerLike(catalogue)  # type: ignore[assignment]
    try:
        started = time.process_time()
        for _ in batch_run.run_batch(catalogue, enumerate(rows), batch_run.BatchOptions(backend="serial")):
            pass
        return time.process_time() - started
    finally:
        batch_run.open_backend = opened


def profile(rows: list[dict[str, str]], top: int = 25) -> None:
    """The sinks of solving `rows` in this process: by own time, then by cumulative time."""
    import cProfile
    import pstats

    from vramplan.batch.run import BatchOptions, run_batch

    catalogue = load_catalogue()
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    for _ in run_batch(catalogue, enumerate(rows), BatchOptions(backend="serial")):
        pass
    profiler.disable()
    seconds = time.perf_counter() - started
    print(f"{len(rows)} rows in {seconds:,.1f} s under cProfile ({1000 * seconds / len(rows):,.1f} ms a row)",
          file=sys.stderr)
    stats = pstats.Stats(profiler, stream=sys.stderr)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


def bench(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    rows = generate_jobs(args.rows, args.seed, args.small)
    if args.every_group > 1:
        rows = every_group(rows, args.every_group)
    if args.profile:
        profile(rows)
        return {}
    if args.worker_cpu:
        seconds = worker_cpu(rows)
        print(f"{len(rows)} rows in {seconds:,.1f} s of CPU in one worker-like process "
              f"({1000 * seconds / len(rows):,.1f} ms a row)", file=sys.stderr)
        return {"rows": len(rows), "cpu_s": round(seconds, 3)}
    seconds, code, statuses = run(rows, args.workers, args.backend, args.chunk_size)
    result = {
        "rows": len(rows), "seconds": round(seconds, 3), "workers": args.workers, "backend": args.backend,
        "small": args.small,
        "unique_jobs": unique_jobs(rows), "rows_per_s": round(len(rows) / seconds, 2),
        "statuses": dict(sorted(statuses.items())), "exit_code": code,
    }
    print(f"{len(rows)} rows ({result['unique_jobs']} unique jobs) in {seconds:,.1f} s on {args.workers} "
          f"{args.backend} worker(s): {result['rows_per_s']:,.1f} rows/s; {result['statuses']}", file=sys.stderr)
    if args.json:
        print(json.dumps(result))
    return result


if __name__ == "__main__":
    bench()
