"""What `vramplan fleet` does; commands/fleet.py declares the options and imports this module only
when the command runs, so that `fleet --help` loads no pydantic, solver or sheet machinery.

Flow: read jobs.csv (a batch sheet plus deadline, earliest_start, priority, required, pools) and
inventory.csv (exit 2 on a bad inventory row or an unknown column; a bad job row becomes an error
row); ask the planner for every job's plans per pool and size; schedule with CP-SAT; write one row
per job row in input order, the per-pool use to stderr (and --pools-out), and --plot a Gantt chart.

--time-limit bounds the whole run from here (fleet/clock.py): reading, the candidate plans (jobs
not reached are written as `unplanned`), the schedule, the explanations; the write comes after.

Ctrl-C: CP-SAT stops its search and keeps the best schedule so far, which is written (status
feasible, interrupted) before exiting 130; an interrupt before any schedule writes every row as
an error row saying so.

Exit codes: 0 every row scheduled (on time, or late under --objective tardiness); 3 some rows
unserved, unplanned or errors (all rows still written); 2 bad input; 1 the run itself failed; 130 stopped.
"""

from __future__ import annotations

import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from vramplan.commands.exits import EXIT_INFEASIBLE, EXIT_INTERRUPTED
from vramplan.commands.fleet_output import (
    POOL_COLUMNS,
    answer_cells,
    output_header,
    pool_rows,
    summary_lines,
)
from vramplan.commands.options import catalogue_files, models_dir_of, open_catalogue
from vramplan.fleet.domain import MAX_POOL_GPUS
from vramplan.fleet.sheet import (
    fleet_start,
    inventory_pools,
    market_pools,
    read_inventory,
    read_jobs,
    resolve_jobs,
)
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.numbers import parse_count
from vramplan.sheets.output_file import claim_outputs, lock_output, output_target, refuse_inputs
from vramplan.sheets.rows import is_empty
from vramplan.sheets.sheet_files import format_of, require_extra, write_table

INTERRUPTED_BEFORE = "not scheduled: the run was interrupted before the first schedule"


def parse_quotas(values: tuple[str, ...]) -> dict[str, int]:
    """PROVIDER=GPUS, GPUS a count (the number grammar) of 0 .. MAX_POOL_GPUS, like a pool's."""
    quotas: dict[str, int] = {}
    for value in values:
        provider, _, number = value.partition("=")
        try:
            gpus = parse_count("quota", number)
        except VramplanError:
            gpus = -1
        if not provider.strip() or not 0 <= gpus <= MAX_POOL_GPUS:
            raise VramplanError("quota", value, f"must be PROVIDER=GPUS, GPUS a whole number from 0 to {MAX_POOL_GPUS:,}"
                                                ", e.g. aws=64")
        if provider.strip() in quotas:  # the last one won silently
            raise VramplanError("quota", value, f"names {provider.strip()} again; give each provider one quota")
        quotas[provider.strip()] = gpus
    return quotas


def _files_read(options: dict[str, Any]) -> list[tuple[str, Path | None]]:
    """Every file the run reads: no output may be one of them (sheets/output_file.py)."""
    return [("jobs", options["jobs"]), ("inventory", options["inventory"]), *catalogue_files(options)]


def _write(path: Path, fmt: str, header: list[str], rows: list[list[Any]]) -> None:
    """Atomically over a regular file, directly into a device or pipe, under the output's lock."""
    target = output_target(path)
    with lock_output(target):
        write_table(target, fmt, header, rows, answer_start=len(header))  # types inferred per column


def run_fleet_command(options: dict[str, Any]) -> None:
    """The fleet command's flow (module docstring)."""
    from vramplan.fleet.clock import Budget
    from vramplan.fleet.inputs import FleetQuery
    from vramplan.fleet.planner import check_pools, finish, prepare, session

    budget = Budget.of(options["time_limit"])  # the whole run, reading the sheets included
    output: Path = options["output"]
    fmt = format_of(output, options["fmt"])
    if options["pools_out"] is not None:
        require_extra(format_of(options["pools_out"]), "writing")
    jobs_format = format_of(options["jobs"], options["input_format"], "jobs", "--input-format")
    inventory_format = format_of(options["inventory"], options["input_format"], "inventory", "--input-format")
    require_extra(fmt, "writing")
    if options["plot"] is not None:
        from vramplan.commands.plot import require_matplotlib

        require_matplotlib(options["plot"])  # a bad extension or no matplotlib: before any work
    outputs = [("output", output), ("pools-out", options["pools_out"]), ("plot", options["plot"])]
    targets = claim_outputs(outputs, _files_read(options))
    catalogue = open_catalogue(options)
    jobs = read_jobs(options["jobs"], jobs_format)
    inventory = read_inventory(options["inventory"], inventory_format)
    start: datetime | None = fleet_start(jobs, inventory, options["start"])
    pools = inventory_pools(catalogue, inventory, start, str(options["inventory"]))
    quotas = parse_quotas(options["quota"])
    if quotas and options["market"] == "off":
        raise VramplanError("quota", options["quota"][0], "applies to the market: add --market on")
    if options["market"] == "on":
        pools += market_pools(catalogue, quotas)
    if not pools:
        raise VramplanError("inventory", str(options["inventory"]), "has no pools (and --market is off)")
    catalogue, configs = resolve_jobs(jobs, start, [p.name for p in pools], catalogue, models_dir_of(options))
    for (option, _), target in zip(outputs, targets):
        if target is not None:  # nor may it replace a config file a job's model cell named
            refuse_inputs(target, [("model config", path) for path in configs], None, option)
    format_of(output, options["fmt"], "output", "--format")  # named as no sheet: after a file it reads says so
    if options["pools_out"] is not None:
        format_of(options["pools_out"], None, "pools-out")
    valid = [i for i, job in enumerate(jobs.jobs) if job is not None]
    query = FleetQuery(jobs=tuple(jobs.jobs[i] for i in valid), pools=tuple(pools), objective=options["objective"],
                       horizon_hours=options["horizon_days"] * 24, time_limit_s=options["time_limit"],
                       num_workers=options["workers"], random_seed=options["seed"])
    check_pools(catalogue, query)  # a bad pool is the run's one line, before the progress line below
    header = output_header(jobs.header, start is not None)
    if "objective" in jobs.header:  # a batch sheet read as a fleet sheet: say that its objectives do nothing
        at = jobs.header.index("objective")
        if any(not is_empty(row[at]) for row in jobs.rows):
            click.echo(f"warning: column 'objective' is not used: every job takes its cheapest plan per size and "
                       f"--objective {options['objective']} decides the schedule", err=True)
    click.echo(f"fleet: {len(valid)} jobs ({len(jobs.rows) - len(valid)} error rows), {len(pools)} pools; "
               f"asking the planner for each job's plans per pool and size", err=True)
    result, interrupted = None, False
    try:
        prepared = prepare(catalogue, query, budget=budget)
        running = session(prepared)
    except KeyboardInterrupt:  # still asking the planner or building the model: no schedule yet
        prepared, interrupted = None, True
    if prepared is not None:
        began = time.perf_counter()
        try:
            schedule = running.run()
        except KeyboardInterrupt:  # between CP-SAT stages (inside one, CP-SAT stops by itself)
            schedule = running.best
            if schedule is not None:
                schedule.interrupted = True
        if schedule is not None:
            try:
                result = finish(prepared, schedule, time.perf_counter() - began)
            except KeyboardInterrupt:  # while explaining: the schedule stands, without explanations
                schedule.interrupted = True
                result = finish(prepared, schedule, time.perf_counter() - began, explain=False)
        interrupted = schedule is None or schedule.interrupted
    by_row = dict(zip(valid, result.assignments)) if result is not None else {}
    rows = []
    for i, row in enumerate(jobs.rows):
        error = jobs.errors[i] if jobs.jobs[i] is None else INTERRUPTED_BEFORE
        rows.append(list(row) + answer_cells(by_row.get(i), error, start))
    _write(output, fmt, header, rows)
    if result is not None:
        # every file before the summary: a closed stderr (`2>&1 | head -1`) must not cost the pools file
        if options["pools_out"] is not None:
            _write(options["pools_out"], format_of(options["pools_out"], None), list(POOL_COLUMNS), pool_rows(result.pools))
        if options["plot"] is not None:
            id_index = jobs.header.index("id") if "id" in jobs.header else None
            labels = [str(jobs.rows[i][id_index]) if id_index is not None else f"row {i + 2}" for i in valid]
            from vramplan.commands.fleet_plot import plot_gantt

            plot_gantt(options["plot"], query, result, labels)
        for line in summary_lines(result):
            click.echo(line, err=True)
    if interrupted:
        click.echo(f"interrupted: wrote the best schedule so far to {output}", err=True)
        sys.exit(EXIT_INTERRUPTED)
    statuses = [cells[len(jobs.header)] for cells in rows]
    if any(status in ("unserved", "unplanned", "error") for status in statuses):
        sys.exit(EXIT_INFEASIBLE)
