"""Price of a plan: whole instances of an offering, for the wall time its tokens take."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from vramplan.models.core.catalogue_schema import GpuSpec, Offering
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.units import ceil_div

Pricing = Literal["on-demand", "spot", "1yr", "3yr"]
PRICINGS: tuple[Pricing, ...] = ("on-demand", "spot", "1yr", "3yr")
_PRICE_FIELDS = {"on-demand": "price_usd_per_hour", "spot": "spot_price_usd_per_hour",
                 "1yr": "price_1yr_usd_per_hour", "3yr": "price_3yr_usd_per_hour"}
PRICING_WORDS = {"on-demand": "on-demand", "spot": "spot", "1yr": "1-year committed", "3yr": "3-year committed"}
SECONDS_PER_HOUR = 3600


@dataclass(frozen=True)
class Cost:
    num_instances: int
    usd_per_hour: float
    hours: float
    usd_total: float


def usd_amount(usd: float) -> str:
    """A dollar amount as the outputs print it, without the unit: whole dollars from 100 up, cents
    below, and two significant digits under a cent, so a run that costs 0.30 USD never reads 0."""
    if usd >= 100:
        return f"{usd:,.0f}"
    if usd >= 0.01:
        return f"{usd:,.2f}"
    return f"{usd:.2g}"


def usd_text(usd: float) -> str:
    """usd_amount with its unit."""
    return f"{usd_amount(usd)} USD"


def network_gb_per_s(offering: Offering, gpu: GpuSpec) -> float:
    """Per-GPU bandwidth between the offering's instances, one direction: its catalogue value, or
    where the row leaves it empty the GPU's usual fabric (catalogue_schema.Offering)."""
    return gpu.network_bandwidth_gb_per_s if offering.network_bandwidth_gb_per_s is None else offering.network_bandwidth_gb_per_s


def num_instances(num_gpus: int, offering: Offering) -> int:
    """Instances to rent: a job smaller than one instance still rents the whole instance."""
    return ceil_div(num_gpus, offering.num_gpus)


def has_price(offering: Offering, pricing: Pricing) -> bool:
    """Whether the offering publishes a price under `pricing` (on-demand always does)."""
    return getattr(offering, _PRICE_FIELDS[pricing]) is not None


def instance_price_usd_per_hour(offering: Offering, pricing: Pricing) -> float:
    """USD per instance-hour under `pricing`: on-demand, spot, or the effective hourly price of a
    1-year / 3-year commitment (catalogues/README.md)."""
    price = getattr(offering, _PRICE_FIELDS[pricing])
    if price is None:
        raise VramplanError("pricing", pricing, f"offering {offering.name} has no {PRICING_WORDS[pricing]} price")
    return price


def refuse_unspot_restarts(restart_overhead: float, pricing: str) -> None:
    """A restart overhead is work preemptions redo, which only spot instances have: with another
    pricing it would be ignored (worked_tokens), so it is refused (docs/input-rules.md#contradictions)."""
    if restart_overhead and pricing != "spot":
        raise VramplanError("restart_overhead", restart_overhead, f"applies to --pricing spot, not {pricing}")


def worked_tokens(tokens: float, pricing: str, restart_overhead: float = 0.0) -> float:
    """The tokens a run processes: on spot instances a preemption sends it back to its last
    checkpoint, and `restart_overhead` is the share of the work done again (with the restarts
    themselves); on-demand and committed instances are not taken back."""
    return tokens * (1 + restart_overhead) if pricing == "spot" else tokens


def training_hours(tokens: float, tokens_per_s: float) -> float:
    return tokens / tokens_per_s / SECONDS_PER_HOUR


def cost(offering: Offering, num_gpus: int, hours: float, pricing: Pricing = "on-demand") -> Cost:
    instances = num_instances(num_gpus, offering)
    usd_per_hour = instances * instance_price_usd_per_hour(offering, pricing)
    return Cost(num_instances=instances, usd_per_hour=usd_per_hour, hours=hours, usd_total=usd_per_hour * hours)
