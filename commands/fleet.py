"""`vramplan fleet`: plan a quarter's training jobs jointly on a finite GPU inventory.

The options only: the work is in commands/fleet_run.py, imported when the command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from vramplan.commands.options import (
    POSITIVE,
    CountRange,
    FilePath,
    OnceCommand,
    OutputPath,
    catalogue_options,
    models_dir_option,
)
from vramplan.fleet.domain import FLEET_OBJECTIVES, MAX_HORIZON_DAYS, MAX_SEED, MAX_TIME_LIMIT_S
from vramplan.fleet.times import TIMESTAMP_FORMS, parse_timestamp
from vramplan.sheets.formats import FORMATS


class AtMost(click.ParamType):
    """A number > 0 in the shared grammar (POSITIVE) and at most `most`: a value out of the domain is
    one line naming the option at parse time, before any file is read."""

    name = "number"

    def __init__(self, most: float) -> None:
        self.most = most

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = POSITIVE.convert(value, param, ctx)
        if number > self.most:
            self.fail(f"{value!r} must be at most {self.most:,}", param, ctx)
        return number


class Timestamp(click.ParamType):
    """An ISO 8601 date or timestamp, as a naive datetime in UTC (fleet/times.py)."""

    name = "timestamp"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        stamp = parse_timestamp(str(value))
        if stamp is None:
            self.fail(f"{value!r} is not a date ({TIMESTAMP_FORMS})", param, ctx)
        return stamp


@click.command("fleet", cls=OnceCommand)
@click.argument("jobs", type=FilePath(exists=True, dir_okay=False, path_type=Path))
@click.option("--inventory", type=FilePath(exists=True, dir_okay=False, path_type=Path), required=True,
              help="Pools: pool, offering (or gpu + provider), num_gpus (or instances), available_from/_to, "
                   "committed, price_usd_per_gpu_hour.")
@click.option("-o", "--output", type=OutputPath(path_type=Path), required=True,
              help="The schedule: one row per job row, input columns first.")
@click.option("--objective", type=click.Choice(FLEET_OBJECTIVES), default="cost", show_default=True,
              help="cost = marginal USD (deadlines hard); makespan = the last end (deadlines hard); "
                   "tardiness = priority-weighted hours late (deadlines soft).")
@click.option("--horizon-days", type=AtMost(MAX_HORIZON_DAYS), default=91.0, show_default=True,
              help=f"Nothing runs past this many days from the start (at most {MAX_HORIZON_DAYS:,}).")
@click.option("--time-limit", type=AtMost(MAX_TIME_LIMIT_S), default=60.0, show_default=True,
              help="Seconds for the whole run: plans, schedule, explanations (at most a day; docs/fleet.md#time-limit).")
@click.option("--workers", type=CountRange(1, 64), default=2, show_default=True, help="CP-SAT workers.")
@click.option("--seed", type=CountRange(0, MAX_SEED), default=0, show_default=True,
              help="CP-SAT random seed (an int32: 0 .. 2**31-1).")
@click.option("--market", type=click.Choice(["on", "off"]), default="off", show_default=True,
              help="Also rent on demand from the offerings catalogue (one pool per provider).")
@click.option("--quota", multiple=True, metavar="PROVIDER=GPUS",
              help="Most GPUs rented at once from one market provider (repeatable).")
@click.option("--start", type=Timestamp(), default=None,
              help="The plan's start (hour 0), UTC unless it has an offset "
                   "[default: the earliest date of earliest_start / available_from].")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None, help="Output format [default: by suffix].")
@click.option("--input-format", type=click.Choice(FORMATS), default=None, help="Jobs/inventory format [default: by suffix].")
@click.option("--pools-out", type=OutputPath(path_type=Path), default=None,
              help="Also write the per-pool use (GPU-hours used and idle, utilisation, USD) to this file.")
@click.option("--plot", type=OutputPath(path_type=Path), default=None,
              help="Draw a Gantt chart per pool (PNG/SVG by suffix; needs the plot extra).")
@models_dir_option
@catalogue_options
def fleet(**options: Any) -> None:
    """Plan many training jobs jointly on a finite GPU inventory (CP-SAT).

    Every job gets one plan that fits (checked in exact bytes), a pool, a start and an end; no pool
    ever exceeds its GPUs; unserved jobs say what extra capacity or later deadline would serve them.
    """
    from vramplan.commands.fleet_run import run_fleet_command  # the machinery, only when the command runs

    run_fleet_command(options)
