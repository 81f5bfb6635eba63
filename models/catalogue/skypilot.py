"""SkyPilot's catalogue (skypilot-org/skypilot-catalog, one `vms.csv` per cloud: InstanceType,
AcceleratorName, AcceleratorCount, vCPUs, MemoryGiB, Price, SpotPrice, Region[, AvailabilityZone],
GpuInfo) as vramplan offerings, for `vramplan catalogue import skypilot DIR`.

Per instance type with GPUs the GPU catalogue knows:
- price: the least on-demand `Price` over its rows; `regions`: every region at that price;
- spot: the median `SpotPrice` over those regions' rows (availability zones), as the shipped rows
  took it (catalogues/offerings.csv sources);
- host RAM: `MemoryGiB`; GPUs: `AcceleratorCount`;
- what SkyPilot does not hold (the scale-out network per GPU, the host link, the NVLink domain,
  the fabric, the countries, committed prices) comes from the shipped row of the same
  provider/instance_type. An instance type with no shipped row and no network is skipped, with
  the reason: a plan across instances would run at an unknown rate.
"""

from __future__ import annotations

import csv
import io
import statistics
from collections import defaultdict
from dataclasses import dataclass

from pydantic import ValidationError

from vramplan.models.core.catalogue_schema import Offering
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.numbers import parse_real

# SkyPilot cloud directories whose provider name differs in vramplan's catalogue.
PROVIDER_OF_CLOUD = {"do": "digitalocean"}

# SkyPilot AcceleratorName -> vramplan GPU name; (cloud, name) overrides where a cloud's name
# means another part (RunPod's and Lambda's 1-GPU "H100" are the PCIe card).
ACCELERATORS = {
    "V100": "v100-sxm-16gb", "V100-32GB": "v100-sxm-32gb", "A100": "a100-sxm-40gb", "A100-80GB": "a100-sxm-80gb",
    "H100": "h100-sxm-80gb", "H100-MEGA": "h100-sxm-80gb", "H100-SXM": "h100-sxm-80gb", "H100-NVL": "h100-nvl-94gb",
    "H200": "h200-sxm-141gb", "B200": "b200-180gb", "B300": "b300-288gb", "GB200": "gb200-186gb",
    "GB300": "gb300-288gb", "GH200": "gh200-96gb", "L4": "l4-24gb", "L40": "l40-48gb", "L40S": "l40s-48gb",
    "A10": "a10-24gb", "A10G": "a10g-24gb", "T4": "t4-16gb", "A6000": "rtx-a6000-48gb",
    "RTX6000-Ada": "rtx-6000-ada-48gb", "RTXPRO6000": "rtx-pro-6000-96gb", "RTX4090": "rtx4090-24gb",
    "MI300X": "mi300x-192gb", "MI325X": "mi325x-256gb", "MI355X": "mi355x-288gb",
}
# (cloud, name) where a cloud's name means another part: RunPod's "H100" is the PCIe card.
CLOUD_ACCELERATORS = {("runpod", "H100"): "h100-pcie-80gb"}
# An instance type that names the form factor wins over the accelerator name (Lambda's
# gpu_1x_h100_pcie is AcceleratorName H100; its gpu_1x_a100 is the PCIe card, _sxm4 the SXM one).
FORM_FACTORS = {("H100", "pcie"): "h100-pcie-80gb", ("A100-80GB", "pcie"): "a100-pcie-80gb"}


@dataclass(frozen=True)
class Skipped:
    instance_type: str
    reason: str


@dataclass(frozen=True)
class Imported:
    offerings: list[Offering]
    skipped: list[Skipped]


def gpu_name(cloud: str, accelerator: str, instance_type: str = "") -> str | None:
    for (name, form), gpu in FORM_FACTORS.items():
        if accelerator == name and form in instance_type.lower():
            return gpu
    return CLOUD_ACCELERATORS.get((cloud, accelerator)) or ACCELERATORS.get(accelerator)


def _number(text: str | None) -> float | None:
    """A number > 0 in the one grammar of models/core/numbers.py (Python's float() took `1_000` as
    1000 and `١٢` as 12, which no catalogue cell takes); anything else is no number (None)."""
    if text in (None, ""):
        return None
    try:
        value = parse_real("cell", text)
    except VramplanError:
        return None
    return value if value > 0 else None


def _rows(cloud: str, text: str) -> csv.DictReader:
    """The rows of a vms.csv; a header that repeats a column is refused (csv.DictReader kept the last
    one silently: a second Price column priced every instance at its cells)."""
    header = next(csv.reader(io.StringIO(text)), [])
    repeated = next((name for index, name in enumerate(header) if name in header[:index]), None)
    if repeated is not None:
        raise VramplanError("cloud", f"{cloud}/vms.csv", f"its header names the column {repeated[:40]!r} twice")
    return csv.DictReader(io.StringIO(text))


def import_cloud(cloud: str, text: str, gpus: set[str], shipped: dict[str, Offering], source: str,
                 price_date: str) -> Imported:
    """The offerings of one cloud's vms.csv text; `gpus`: the GPU catalogue's names; `shipped`:
    the packaged offerings by name (the facts SkyPilot lacks); `source`: where the file came from
    (repository, path, commit), written into every row with `price_date`."""
    provider = PROVIDER_OF_CLOUD.get(cloud, cloud)
    rows_by_type: dict[str, list[dict[str, str]]] = defaultdict(list)
    for row in _rows(cloud, text):
        if row.get("InstanceType"):
            rows_by_type[row["InstanceType"]].append(row)
    offerings: list[Offering] = []
    skipped: list[Skipped] = []
    for instance_type in sorted(rows_by_type):
        rows = rows_by_type[instance_type]
        found = _offering(cloud, provider, instance_type, rows, gpus, shipped, source, price_date)
        if isinstance(found, Offering):
            offerings.append(found)
        else:
            skipped.append(found)
    return Imported(offerings, skipped)


def _offering(cloud: str, provider: str, instance_type: str, rows: list[dict[str, str]], gpus: set[str],
              shipped: dict[str, Offering], source: str, price_date: str) -> Offering | Skipped:
    accelerator = rows[0].get("AcceleratorName") or ""
    if not accelerator:
        return Skipped(instance_type, "no GPU")
    gpu = gpu_name(cloud, accelerator, instance_type)
    if gpu is None or gpu not in gpus:
        return Skipped(instance_type, f"accelerator {accelerator} is not in the GPU catalogue")
    count = _number(rows[0].get("AcceleratorCount"))
    if count is None or count != int(count):
        return Skipped(instance_type, f"not a whole number of GPUs ({rows[0].get('AcceleratorCount')})")
    priced = [(price, row) for row in rows if (price := _number(row.get("Price"))) is not None]
    if not priced:
        unread = next((cell for row in rows if (cell := (row.get("Price") or "").strip())), None)
        return Skipped(instance_type, "no on-demand price" if unread is None else
                       f"Price {unread[:40]!r} is not a number > 0")
    cheapest = min(price for price, _ in priced)
    at_cheapest = [row for price, row in priced if price == cheapest]
    regions = sorted({row.get("Region", "") for row in at_cheapest} - {""})
    spots = [spot for row in at_cheapest if (spot := _number(row.get("SpotPrice"))) is not None]
    memory = _number(rows[0].get("MemoryGiB"))
    known = shipped.get(f"{provider}/{instance_type}")
    if memory is None:
        if known is None:
            return Skipped(instance_type, "host RAM unknown")
        memory = known.host_memory_gib
    if known is None:
        return Skipped(instance_type, "network unknown (no shipped row of this instance type to take it from)")
    update = {
        "gpu": gpu, "num_gpus": int(count), "price_usd_per_hour": cheapest,
        "spot_price_usd_per_hour": statistics.median(spots) if spots else None, "host_memory_gib": memory,
        "price_date": price_date, "regions": ";".join(regions),
        "countries": known.countries if set(regions) <= set(known.regions.split(";")) else "",
        "source": f"{source}: least Price over regions, median SpotPrice there, MemoryGiB; network, host link, "
                  f"NVLink domain, fabric and commitments from the shipped row ({known.source})",
    }
    try:  # validated as `catalogue check` reads it: a file it writes is one the catalogue takes
        return Offering.model_validate({**known.model_dump(), **update})
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        return Skipped(instance_type, f"{field}={first.get('input')!r} is out of the catalogue's range ({first['msg']})")
