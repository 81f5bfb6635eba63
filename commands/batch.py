"""`vramplan batch`: solve every row of a capacity-planning spreadsheet, losing nothing.

The options only: the work (reading the sheet, the journal, the backends, writing the output) is
in commands/batch_run.py, imported when the command runs (`batch --help` stays quick).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from vramplan.commands.options import CountRange, FilePath, OnceCommand, OutputPath, catalogue_options, models_dir_option
from vramplan.sheets.formats import FORMATS


@click.command("batch", cls=OnceCommand)
@click.argument("jobs", type=FilePath(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", type=OutputPath(path_type=Path), required=True,
              help="Where to write the plans (one row per job, input columns first).")
@click.option("--format", "output_format", type=click.Choice(FORMATS), default=None,
              help="Output format [default: from the output's extension, else csv].")
@click.option("--workers", type=CountRange(1, 4096), default=None,
              help="Worker processes (local backend, or a local Ray/Dask cluster) [default: CPU cores].")
@click.option("--backend", type=click.Choice(["local", "ray", "dask"]), default="local", show_default=True,
              help="local = process pool; ray/dask = a cluster (pip install 'vramplan[ray]' / '[dask]').")
@click.option("--address", default=None,
              help="Ray address (or RAY_ADDRESS), Dask scheduler address or scheduler file [default: local cluster].")
@click.option("--chunk-size", type=CountRange(1, 10_000), default=None,
              help="Rows per task, exactly [default: about 16 locally, rows of one model and job together].")
@click.option("--resume", is_flag=True,
              help="Keep the rows the output (and its journal) already answer; solve the rest.")
@click.option("--strict-columns", is_flag=True,
              help="A column vramplan does not know is an error [default: copied to the output, one warning].")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar, no summary and no warnings on stderr.")
@catalogue_options
@models_dir_option
def batch(**options: Any) -> None:
    """Solve every row of JOBS (CSV, XLSX, Parquet or JSON lines; one job per row) and write the plans.

    Columns are named like `solve`'s options in snake_case (model and seq_len are required); see
    docs/batch.md for the schema. Exit code 3 when some rows are infeasible or errors.
    """
    from vramplan.commands.batch_run import run_batch_command  # the machinery, only when the command runs

    run_batch_command(options)
