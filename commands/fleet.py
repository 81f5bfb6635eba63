"""`vramplan fleet`: plan a quarter's training jobs jointly on a finite GPU inventory.

The options only: the work is in commands/fleet_run.py, imported when the command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from vramplan.commands.options import POSITIVE, catalogue_options
from vramplan.fleet.domain import FLEET_OBJECTIVES
from vramplan.sheets.formats import FORMATS


@click.command("fleet")
@click.argument("jobs", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--inventory", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True,
              help="Pools: pool, offering (or gpu + provider), num_gpus (or instances), available_from/_to, "
                   "committed, price_usd_per_gpu_hour.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The schedule: one row per job row, input columns first.")
@click.option("--objective", type=click.Choice(FLEET_OBJECTIVES), default="cost", show_default=True,
              help="cost = marginal USD (deadlines hard); makespan = the last end (deadlines hard); "
                   "tardiness = priority-weighted hours late (deadlines soft).")
@click.option("--horizon-days", type=POSITIVE, default=91.0, show_default=True,
              help="Nothing runs past this many days from the start.")
@click.option("--time-limit", type=POSITIVE, default=60.0, show_default=True, help="Seconds for CP-SAT.")
@click.option("--workers", type=click.IntRange(1, 64), default=2, show_default=True, help="CP-SAT workers.")
@click.option("--seed", type=int, default=0, show_default=True, help="CP-SAT random seed.")
@click.option("--market", type=click.Choice(["on", "off"]), default="off", show_default=True,
              help="Also rent on demand from the offerings catalogue (one pool per provider).")
@click.option("--quota", multiple=True, metavar="PROVIDER=GPUS",
              help="Most GPUs rented at once from one market provider (repeatable).")
@click.option("--start", type=click.DateTime(), default=None,
              help="The plan's start (hour 0) [default: the earliest date of earliest_start / available_from].")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None, help="Output format [default: by suffix].")
@click.option("--input-format", type=click.Choice(FORMATS), default=None, help="Jobs/inventory format [default: by suffix].")
@click.option("--pools-out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the per-pool use (GPU-hours used and idle, utilisation, USD) to this file.")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Draw a Gantt chart per pool (PNG/SVG by suffix; needs the plot extra).")
@catalogue_options
def fleet(**options: Any) -> None:
    """Plan many training jobs jointly on a finite GPU inventory (CP-SAT).

    Every job gets one plan that fits (checked in exact bytes), a pool, a start and an end; no pool
    ever exceeds its GPUs; unserved jobs say what extra capacity or later deadline would serve them.
    """
    from vramplan.commands.fleet_run import run_fleet_command  # the machinery, only when the command runs

    run_fleet_command(options)
