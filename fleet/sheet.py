"""The fleet's spreadsheets: jobs.csv (a batch sheet plus scheduling columns) and inventory.csv.

Times are hours from the plan's start (a number, 0 .. MAX_TIME_HOURS) or dates/timestamps (ISO
8601 text, or date cells of XLSX/Parquet), in UTC (fleet/times.py: an offset is converted, no
offset means UTC). The start is --start, else the earliest date among earliest_start and
available_from; a sheet with dates only in deadline/available_to needs --start. A bad job row is
an error row of the output (status=error), never a lost row; a bad inventory row stops the run
(exit 2): without its pools no schedule means anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from vramplan.fleet.inputs import MAX_PRIORITY, MAX_TIME_HOURS, FleetJob, Pool, PoolWindow
from vramplan.fleet.times import TIMESTAMP_FORMS, parse_timestamp, utc
from vramplan.models.catalogue.catalogue import Catalogue
from vramplan.models.catalogue.config_file import config_path
from vramplan.models.core.errors import VramplanError, closest_names, from_validation_error
from vramplan.models.core.numbers import parse_count, parse_real
from vramplan.sheets.rows import (
    check_columns,
    is_empty,
    misspells,
    parse_row,
    refuse_repeated_columns,
    unreadable_header_error,
)
from vramplan.sheets.sheet_files import read_table
from vramplan.solver import check_job_runs, named_list, split_list

# Columns the fleet adds to a batch sheet: name -> (default, what it is). In docs/fleet.md's order.
FLEET_JOB_COLUMNS: dict[str, tuple[str, str]] = {
    "deadline": ("none", "latest end: a date, or hours from the start"),
    "earliest_start": ("0 (the start)", "earliest start: a date, or hours from the start"),
    "priority": ("1", "weight of each hour late (tardiness) and of leaving the job unserved"),
    "required": ("false", "true: serve this job before any optional one"),
    "pools": ("any", "pools the job may run on, separated by ;"),
}
INVENTORY_COLUMNS: dict[str, tuple[str, str]] = {
    "pool": ("required", "name of the pool; several rows of one pool are its availability windows"),
    "offering": ("-", "catalogue offering provider/instance_type (or give gpu and provider)"),
    "gpu": ("-", "GPU name, with provider: the provider's largest instance of that GPU"),
    "provider": ("-", "provider, with gpu"),
    "num_gpus": ("-", "GPUs in the pool during this window (or give instances)"),
    "instances": ("-", "instances in the pool during this window"),
    "available_from": ("0 (the start)", "a date, or hours from the start"),
    "available_to": ("the horizon", "a date, or hours from the start"),
    "committed": ("false", "true: already paid for (marginal cost 0, idle time reported)"),
    "price_usd_per_gpu_hour": ("the catalogue's", "your price per GPU-hour for this pool"),
}
WINDOW_COLUMNS = {"from_hours": "available_from", "to_hours": "available_to"}  # PoolWindow's fields
TRUE, FALSE = ("true", "yes", "1", "y"), ("false", "no", "0", "n")
MARKET_PREFIX = "market:"


def parse_bool(field_name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in TRUE or text in FALSE:
        return text in TRUE
    raise VramplanError(field_name, value, "must be true or false")


def parse_priority(value: Any) -> float:
    """The number grammar (models/core/numbers.py), 0 .. MAX_PRIORITY."""
    priority = parse_real("priority", value)
    if not 0 <= priority <= MAX_PRIORITY:
        raise VramplanError("priority", value, f"must be between 0 and {MAX_PRIORITY}")
    return priority


def _in_domain(field_name: str, value: Any, hours: float) -> float:
    if not 0 <= hours <= MAX_TIME_HOURS:
        raise VramplanError(field_name, value, f"must be between 0 and {MAX_TIME_HOURS:g} hours from the start")
    return hours


def parse_time(field_name: str, value: Any) -> float | datetime:
    """Hours from the start (the number grammar, 0 .. MAX_TIME_HOURS) or a timestamp in UTC (fleet/times.py)."""
    if isinstance(value, (datetime, date)):
        return utc(value)
    try:
        hours = parse_real(field_name, value)
    except VramplanError:
        stamp = parse_timestamp(value) if isinstance(value, str) else None
        if stamp is None:
            raise VramplanError(field_name, value, f"is neither hours from the start nor a date ({TIMESTAMP_FORMS})") \
                from None
        return stamp
    return _in_domain(field_name, value, hours)


def hours_from(start: datetime | None, field_name: str, value: float | datetime) -> float:
    if isinstance(value, float):
        return value
    if start is None:
        raise VramplanError(field_name, value.isoformat(), "is a date, but no start is known: pass --start")
    hours = (value - start) / timedelta(hours=1)
    if hours < 0:
        raise VramplanError(field_name, value.isoformat(), f"is before the plan's start {start.isoformat()}")
    return _in_domain(field_name, value.isoformat(), hours)


@dataclass
class JobRows:
    header: list[str]
    rows: list[list[Any]]
    jobs: list[FleetJob | None]  # per row; None = an error row
    errors: list[str | None]
    times: list[dict[str, float | datetime]] = field(default_factory=list)


def _unknown(name: str, known: dict[str, Any], what: str) -> VramplanError:
    unreadable = unreadable_header_error(name)
    if unreadable is not None:
        return unreadable
    close = closest_names(name, known, limit=1)
    hint = f"did you mean {close[0]!r}?" if close else f"known columns: {', '.join(known)}"
    return VramplanError("column", name, f"unknown {what} column; {hint}")


def read_jobs(path: Path, fmt: str) -> JobRows:
    unread: dict[int, VramplanError] = {}  # rows the sheet does not give whole: their own errors
    header, rows = read_table(path, fmt, row_errors=unread)
    refuse_repeated_columns(header)
    # the user's own columns are copied through, as batch copies them (a batch sheet is a fleet sheet)
    own = set(check_columns([name for name in header if name not in FLEET_JOB_COLUMNS], strict=False))
    for name in own:  # a misspelt fleet column (dedline) is no column of the user's own
        typo = misspells(name, FLEET_JOB_COLUMNS)
        if typo is not None:
            raise VramplanError("column", name, f"unknown column; did you mean {typo!r}?")
    jobs: list[FleetJob | None] = []
    errors: list[str | None] = []
    times: list[dict[str, float | datetime]] = []
    for at, row in enumerate(rows):
        cells = dict(zip(header, row))
        batch = {name: value for name, value in cells.items() if name not in FLEET_JOB_COLUMNS and name not in own}
        fleet = {name: value for name, value in cells.items() if name in FLEET_JOB_COLUMNS and not is_empty(value)}
        try:
            if at in unread:
                raise unread[at]
            query = parse_row(batch)
            row_times = {name: parse_time(name, fleet[name]) for name in ("deadline", "earliest_start") if name in fleet}
            extra = {"priority": parse_priority(fleet.get("priority", 1.0)),
                     "required": parse_bool("required", fleet.get("required", False)),
                     "pools": named_list(fleet, "pools")}
            jobs.append(FleetJob.model_construct(query=query, **extra))  # validated once the start is known
            times.append(row_times)
            errors.append(None)
        except VramplanError as error:
            jobs.append(None)
            times.append({})
            errors.append(" ".join(str(error).split()))
    return JobRows(header, rows, jobs, errors, times)


def _offering_name(catalogue: Catalogue, cells: dict[str, Any]) -> str:
    if not is_empty(cells.get("offering")):
        offering = catalogue.offering(str(cells["offering"]).strip())
        # a gpu or provider beside it must be the offering's (the offering won silently)
        for column, own in (("gpu", offering.gpu), ("provider", offering.provider)):
            given = cells.get(column)
            if not is_empty(given) and str(given).strip() != own:
                raise VramplanError(column, given, f"is not offering {offering.name}'s ({own}); give the offering, "
                                                   "or a gpu and a provider")
        return offering.name
    gpu, provider = cells.get("gpu"), cells.get("provider")
    if is_empty(gpu) or is_empty(provider):
        raise VramplanError("offering", "", "give an offering, or a gpu and a provider")
    gpu = catalogue.gpu(str(gpu).strip()).name
    matches = [o for o in catalogue.offerings_for(gpu) if o.provider == str(provider).strip()]
    if not matches:
        providers = sorted({o.provider for o in catalogue.offerings_for(gpu)})
        raise VramplanError("provider", provider, f"has no {gpu} offering; providers of {gpu}: {', '.join(providers)}")
    return max(matches, key=lambda o: (o.num_gpus, o.name)).name


def _window(catalogue: Catalogue, offering: str, cells: dict[str, Any], start: datetime | None,
            times: dict[str, float | datetime]) -> PoolWindow:
    per_instance = catalogue.offering(offering).num_gpus
    # The sheet's number grammar (models/core/numbers.py): `1e3` is a count, `1_000`, `true`, `2.5` are not.
    if not is_empty(cells.get("num_gpus")):
        gpus = parse_count("num_gpus", cells["num_gpus"])
        if not is_empty(cells.get("instances")) and parse_count("instances", cells["instances"]) * per_instance != gpus:
            # both given and disagreeing: num_gpus was taken silently
            raise VramplanError("instances", cells["instances"], f"is {parse_count('instances', cells['instances'])} x "
                                f"{per_instance} GPUs of {offering}, not the row's num_gpus {gpus}; give one of them")
    elif not is_empty(cells.get("instances")):
        gpus = parse_count("instances", cells["instances"]) * per_instance
    else:
        raise VramplanError("num_gpus", "", "give num_gpus or instances")
    hours = {name: hours_from(start, name, value) for name, value in times.items()}
    try:
        window = PoolWindow(from_hours=hours.get("available_from", 0.0), to_hours=hours.get("available_to"),
                            num_gpus=gpus)
    except ValidationError as error:
        wrong = from_validation_error(error, cells)
        column = WINDOW_COLUMNS.get(wrong.field, wrong.field)  # the sheet's name, not the model's
        raise VramplanError(column, cells.get(column, wrong.value), wrong.reason) from None
    if window.to_hours is not None and window.to_hours <= window.from_hours:
        raise VramplanError("available_to", cells.get("available_to"), "is not after available_from")
    return window


@dataclass
class InventoryRows:
    rows: list[dict[str, Any]]
    times: list[dict[str, float | datetime]]


def read_inventory(path: Path, fmt: str) -> InventoryRows:
    header, rows = read_table(path, fmt, field="inventory")
    refuse_repeated_columns(header)
    for name in header:
        if name not in INVENTORY_COLUMNS:
            raise _unknown(name, INVENTORY_COLUMNS, "inventory")
    if "pool" not in header:
        raise VramplanError("column", "pool", "is required in the inventory")
    cells_list, times = [], []
    for number, row in enumerate(rows, 2):
        cells = {name: value for name, value in zip(header, row) if not is_empty(value)}
        try:
            if "pool" not in cells:
                raise VramplanError("pool", "", "is required; the cell is empty")
            times.append({name: parse_time(name, cells[name]) for name in ("available_from", "available_to")
                          if name in cells})
        except VramplanError as error:
            raise VramplanError("inventory", str(path), f"row {number}: {error}") from None
        cells_list.append(cells)
    return InventoryRows(cells_list, times)


def inventory_pools(catalogue: Catalogue, inventory: InventoryRows, start: datetime | None, origin: str) -> list[Pool]:
    """Rows grouped by pool name (first appearance order); one offering and one price per pool."""
    grouped: dict[str, list[tuple[int, dict[str, Any], dict]]] = {}
    for number, (cells, times) in enumerate(zip(inventory.rows, inventory.times), 2):
        grouped.setdefault(str(cells["pool"]).strip(), []).append((number, cells, times))
    pools = []
    for name, rows in grouped.items():
        number = rows[0][0]
        try:
            if name.startswith(MARKET_PREFIX):
                raise VramplanError("pool", name, f"names starting {MARKET_PREFIX!r} are the market's (--market)")
            if split_list(name) != (name,):  # a job's pools cell could never name it
                raise VramplanError("pool", name, "holds ';' or ',', which separate the pools of a job's pools cell")
            offerings = set()
            windows = []
            for row_number, cells, times in rows:
                number = row_number  # a cell's error names its own row
                offering = _offering_name(catalogue, cells)
                offerings.add(offering)
                windows.append(_window(catalogue, offering, cells, start, times))
            _refuse_overlapping_windows(name, rows, windows)
            number = rows[0][0]  # what the pool as a whole is refused for names its first row
            if len(offerings) > 1:
                raise VramplanError("offering", sorted(offerings)[1], f"pool {name!r} has rows of different offerings")
            first = rows[0][1]
            for row_number, cells, _times in rows[1:]:  # one commitment and one price per pool, on every row
                number = row_number  # (a later row's cells were never read: 'maybe' and -5 passed)
                for column, read in (("committed", lambda v: parse_bool("committed", v)),
                                     ("price_usd_per_gpu_hour", lambda v: parse_real("price_usd_per_gpu_hour", v))):
                    if not is_empty(cells.get(column)) and read(cells[column]) != (
                            read(first[column]) if not is_empty(first.get(column)) else None):
                        raise VramplanError(column, cells[column], f"differs from the first row of pool {name!r}: one "
                                                                   f"{column} per pool")
            number = rows[0][0]
            pool = Pool(name=name, offering=offerings.pop(), windows=tuple(windows),
                        committed=parse_bool("committed", first.get("committed", False)),
                        price_usd_per_gpu_hour=first.get("price_usd_per_gpu_hour"))  # the number grammar
        except _RowError as at:
            raise VramplanError("inventory", origin, f"row {at.number}: {at.error}") from None
        except ValidationError as error:
            raise VramplanError("inventory", origin, f"row {number}: {from_validation_error(error, first)}") from None
        except (VramplanError, ValueError) as error:
            raise VramplanError("inventory", origin, f"row {number}: {error}") from None
        pools.append(pool)
    return pools


def _refuse_overlapping_windows(name: str, rows: list[tuple[int, dict[str, Any], dict]], windows: list[PoolWindow]) -> None:
    """Raise, naming the later window's row and its cell as written, where two of a pool's windows
    overlap (Pool's own check named the pool's first row and the later window's hours)."""
    order = sorted(range(len(windows)), key=lambda i: windows[i].from_hours)
    for a, b in zip(order, order[1:]):
        ends = windows[a].to_hours
        if ends is None or ends > windows[b].from_hours:
            number, cells = rows[b][0], rows[b][1]
            raise _RowError(number, VramplanError("available_from", cells.get("available_from", ""),
                                                  f"overlaps the window of row {rows[a][0]} (pool {name!r})"))


class _RowError(Exception):
    """An inventory error of a given row (inventory_pools words it as the others)."""

    def __init__(self, number: int, error: VramplanError) -> None:
        super().__init__(str(error))
        self.number, self.error = number, error


def market_pools(catalogue: Catalogue, quotas: dict[str, int]) -> list[Pool]:
    """One pool per provider of the offerings catalogue; a quota bounds its GPUs at every moment."""
    providers = sorted({o.provider for o in catalogue.offerings.values()})
    for provider in quotas:
        if provider not in providers:  # matched as --provider and --gpu match theirs: exactly, with the names meant
            close = closest_names(provider, providers)
            hint = f"did you mean {', '.join(close)}?" if close else f"providers: {', '.join(providers)}"
            raise VramplanError("quota", provider, f"is not a provider of the catalogue (names match exactly, "
                                                   f"as for --provider); {hint}")
    return [Pool(name=MARKET_PREFIX + p, market_provider=p,
                 windows=None if p not in quotas else (PoolWindow(num_gpus=quotas[p]),)) for p in providers]


def fleet_start(jobs: JobRows, inventory: InventoryRows, start: datetime | None) -> datetime | None:
    """--start, else the earliest date among earliest_start and available_from cells."""
    if start is not None:
        return start
    dates = [t["earliest_start"] for t in jobs.times if isinstance(t.get("earliest_start"), datetime)]
    dates += [t["available_from"] for t in inventory.times if isinstance(t.get("available_from"), datetime)]
    return min(dates) if dates else None


def resolve_jobs(jobs: JobRows, start: datetime | None, pool_names: list[str], catalogue: Catalogue,
                 models_dir: Path) -> tuple[Catalogue, list[Path]]:
    """Hours from the start for each job row; a bad time, pool or model turns the row into an error row.
    A `model` cell that is a path is read here, once, and only inside `models_dir`, as batch reads
    its sheet (docs/input-rules.md#paths-in-a-batch-sheet). Returns the catalogue with those
    configs added under their cells, which the planner reads instead of the paths, and the files read
    (no output may replace one)."""
    read: dict[str, VramplanError | None] = {}  # model cells that are paths: None once read, else its error
    paths: dict[Path, None] = {}
    names = {name.lower() for name in catalogue.architectures}
    for i, job in enumerate(jobs.jobs):
        if job is None:
            continue
        try:
            model = job.query.model
            if model.lower() not in names and model not in read:
                try:
                    arch = catalogue.architecture(model, models_dir)
                    catalogue = replace(catalogue, architectures={**catalogue.architectures, model: arch})
                    path = config_path(model, models_dir)
                    if path is not None:
                        paths.setdefault(path, None)
                    read[model] = None
                except VramplanError as error:
                    read[model] = error
            unread = read.get(model)
            if unread is not None:
                raise unread
            check_job_runs(catalogue, job.query)  # a job its stack refuses is this row's error, as in batch
            for name in job.pools:
                if name not in pool_names:
                    close = closest_names(name, pool_names, limit=1)
                    hint = f"did you mean {close[0]!r}?" if close else f"pools: {', '.join(pool_names)}"
                    raise VramplanError("pools", name, f"is not a pool of the inventory; {hint}")
            hours = {f"{name}_hours": hours_from(start, name, value) for name, value in jobs.times[i].items()}
            jobs.jobs[i] = FleetJob(query=job.query, priority=float(job.priority), required=job.required,
                                    pools=job.pools, **hours)
        except ValidationError as error:
            jobs.jobs[i], jobs.errors[i] = None, str(from_validation_error(error, {"priority": job.priority}))
        except (VramplanError, ValueError) as error:
            jobs.jobs[i], jobs.errors[i] = None, " ".join(str(error).split())
    return catalogue, list(paths)
