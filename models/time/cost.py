"""Price of a plan: whole instances of an offering, for the wall time its tokens take."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from vramplan.models.core.catalogue_schema import Offering
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.units import ceil_div

Pricing = Literal["on-demand", "spot"]
PRICINGS: tuple[Pricing, ...] = ("on-demand", "spot")
SECONDS_PER_HOUR = 3600


@dataclass(frozen=True)
class Cost:
    num_instances: int
    usd_per_hour: float
    hours: float
    usd_total: float


def num_instances(num_gpus: int, offering: Offering) -> int:
    """Instances to rent: a job smaller than one instance still rents the whole instance."""
    return ceil_div(num_gpus, offering.num_gpus)


def instance_price_usd_per_hour(offering: Offering, pricing: Pricing) -> float:
    if pricing == "spot":
        if offering.spot_price_usd_per_hour is None:
            raise VramplanError("pricing", pricing, f"offering {offering.name} has no spot price")
        return offering.spot_price_usd_per_hour
    return offering.price_usd_per_hour


def training_hours(tokens: float, tokens_per_s: float) -> float:
    return tokens / tokens_per_s / SECONDS_PER_HOUR


def cost(offering: Offering, num_gpus: int, hours: float, pricing: Pricing = "on-demand") -> Cost:
    instances = num_instances(num_gpus, offering)
    usd_per_hour = instances * instance_price_usd_per_hour(offering, pricing)
    return Cost(num_instances=instances, usd_per_hour=usd_per_hour, hours=hours, usd_total=usd_per_hour * hours)
