"""Pydantic schemas of the three catalogues: the single source of truth for their columns.

The CSV header of each catalogue must equal the field order of its model
(tests/catalogues/test_packaged_files.py checks it), and catalogues/README.md documents every
column. Units are in the column names: GB = 1e9 bytes, GiB/MiB = 2^30/2^20 bytes,
bandwidths in GB/s (decimal), throughput in dense (non-sparse) TFLOPS. The architectures' schema is
models/core/architecture_schema.py (re-exported here); every row's base is models/core/catalogue_row.py.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from vramplan.models.core.architecture_schema import MAX_LAYERS as MAX_LAYERS  # noqa: F401 (re-exported)
from vramplan.models.core.architecture_schema import Architecture as Architecture  # noqa: F401 (re-exported)
from vramplan.models.core.catalogue_row import CatalogueRow
from vramplan.models.core.clock import PRICE_DATE_GRACE, date_of, today
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.numbers import Count, Real

LIST_PROVIDER = "list"  # offerings.csv rows that are reference prices, not rentable instances
_NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9.\-]*$")

# Domains of the numeric columns (catalogues/README.md): plausible hardware and prices, all finite.
MIN_TFLOPS, MAX_TFLOPS = 0.1, 100_000  # per GPU, dense (B200: 2,250 bf16; V100: 15.7 fp32)
MIN_GB_PER_S, MAX_GB_PER_S = 0.1, 100_000  # per GPU, one direction (B200 HBM3e: 8,000; 1 Gb/s NIC: 0.125)
MIN_USD_PER_HOUR, MAX_USD_PER_HOUR = 0.0001, 10_000  # per instance-hour (p5en.48xlarge: about 63)


class GpuSpec(CatalogueRow):
    """One accelerator model (one row of catalogues/gpus.csv)."""

    name: str = Field(description="catalogue key, lower-case, e.g. h100-sxm-80gb")
    vendor: Literal["nvidia", "amd"]
    architecture: str = Field(description="chip generation, e.g. hopper")
    memory_marketed_gb: Real = Field(ge=0.1, le=100_000, description="capacity as marketed, decimal GB")
    memory_usable_mib: Count = Field(
        ge=64, le=100_000_000, description="total memory the driver reports (nvidia-smi / rocm-smi), MiB; the bound uses this"
    )
    bf16_dense_tflops: Real = Field(ge=0, le=MAX_TFLOPS, description="dense BF16 tensor TFLOPS; 0 = unsupported")
    fp16_dense_tflops: Real = Field(ge=MIN_TFLOPS, le=MAX_TFLOPS, description="dense FP16 tensor TFLOPS")
    fp32_dense_tflops: Real = Field(ge=MIN_TFLOPS, le=MAX_TFLOPS, description="dense FP32 (IEEE, non-tensor) TFLOPS")
    fp8_supported: bool
    fp8_dense_tflops: Real = Field(ge=0, le=MAX_TFLOPS, description="dense FP8 tensor TFLOPS; 0 when unsupported")
    hbm_bandwidth_gb_per_s: Real = Field(ge=MIN_GB_PER_S, le=MAX_GB_PER_S)
    intra_node_bandwidth_gb_per_s: Real = Field(
        ge=MIN_GB_PER_S, le=MAX_GB_PER_S, description="GPU-to-GPU bandwidth inside a node, per GPU, one direction"
    )
    gpus_per_node: Count = Field(ge=1, le=72)
    network_bandwidth_gb_per_s: Real = Field(
        ge=MIN_GB_PER_S, le=MAX_GB_PER_S, description="scale-out network bandwidth per GPU across nodes, one direction"
    )
    source: str

    @field_validator("name")
    @classmethod
    def _name_is_a_key(cls, value: str) -> str:
        if not _NAME_PATTERN.match(value):
            raise ValueError(f"name {value!r} must be lower-case letters, digits, '.' and '-'")
        return value

    @field_validator("bf16_dense_tflops", "fp8_dense_tflops")
    @classmethod
    def _zero_or_plausible(cls, value: float) -> float:
        if 0 < value < MIN_TFLOPS:
            raise ValueError(f"must be 0 (unsupported) or at least {MIN_TFLOPS} TFLOPS")
        return value

    @model_validator(mode="after")
    def _fp8_is_consistent(self) -> GpuSpec:
        if self.fp8_supported != (self.fp8_dense_tflops > 0):
            raise VramplanError(
                "fp8_supported", self.fp8_supported, f"must be true exactly when fp8_dense_tflops > 0 (is {self.fp8_dense_tflops})"
            )
        return self

    @property
    def memory_usable_bytes(self) -> int:
        return self.memory_usable_mib * 2**20


class Offering(CatalogueRow):
    """One way to buy GPUs (one row of catalogues/offerings.csv): an instance type of a provider."""

    provider: str = Field(description="e.g. aws, lambda, runpod, list")
    instance_type: str
    gpu: str = Field(description="a name in the GPU catalogue")
    num_gpus: Count = Field(ge=1, le=72, description="GPUs per instance")
    price_usd_per_hour: Real = Field(ge=MIN_USD_PER_HOUR, le=MAX_USD_PER_HOUR, description="on-demand USD per instance-hour")
    spot_price_usd_per_hour: Real | None = Field(default=None, ge=MIN_USD_PER_HOUR, le=MAX_USD_PER_HOUR,
                                                 description="spot USD per instance-hour")
    host_memory_gib: Real = Field(ge=1, le=1_000_000, description="host (CPU) RAM per instance, GiB")
    network_bandwidth_gb_per_s: Real | None = Field(
        default=None, ge=0.001, le=MAX_GB_PER_S,  # 100 Mbps pods are 0.0125
        description="scale-out bandwidth per GPU between instances, one direction, GB/s; empty = the GPU's usual fabric",
    )
    price_date: str = Field(description="when the price was read, YYYY-MM or YYYY-MM-DD")
    regions: str = Field(default="", description="';'-separated regions where this price applies; empty = any")
    countries: str = Field(default="", description="';'-separated ISO 3166-1 alpha-2 codes of those regions")
    price_1yr_usd_per_hour: Real | None = Field(default=None, ge=MIN_USD_PER_HOUR, le=MAX_USD_PER_HOUR,
                                                description="USD per instance-hour under a 1-year commitment")
    price_3yr_usd_per_hour: Real | None = Field(default=None, ge=MIN_USD_PER_HOUR, le=MAX_USD_PER_HOUR,
                                                description="USD per instance-hour under a 3-year commitment")
    host_link_gb_per_s: Real | None = Field(
        default=None, ge=MIN_GB_PER_S, le=MAX_GB_PER_S,
        description="GPU <-> host bandwidth per GPU, one direction, GB/s (PCIe Gen4 x16 32, Gen5 64, NVLink-C2C 450)")
    scale_up_gpus: Count | None = Field(default=None, ge=1, le=576,
                                        description="GPUs in one NVLink/xGMI domain (8 HGX, 72 NVL72); empty = num_gpus")
    fabric: str = Field(default="", description="the scale-out network, e.g. 'EFA', 'InfiniBand NDR', '100 Mbps Ethernet'")
    source: str

    @field_validator("provider", "instance_type", "gpu")
    @classmethod
    def _no_slash(cls, value: str) -> str:
        if not value or "/" in value:
            raise ValueError(f"{value!r} must be non-empty and contain no '/'")
        return value

    @field_validator("provider")
    @classmethod
    def _selectable(cls, value: str) -> str:
        """A name --provider, a batch `providers` cell and --quota can name: ',' and ';' separate names
        there and '=' ends a quota's provider, so a provider holding one could never be selected."""
        if any(mark in value for mark in ",;="):
            raise ValueError(f"{value!r} must contain no ',', ';' or '=' (they separate names in --provider and --quota)")
        return value

    @field_validator("price_date")
    @classmethod
    def _is_a_date(cls, value: str) -> str:
        if not re.match(r"^\d{4}-\d{2}(-\d{2})?$", value):
            raise ValueError(f"price_date {value!r} must be YYYY-MM or YYYY-MM-DD")
        try:
            read_on = date_of(value)
        except ValueError:
            raise ValueError(f"price_date {value!r} is not a date of the calendar") from None
        try:
            now = today()
        except VramplanError:
            return value  # a bad VRAMPLAN_TODAY is its own one-line error, where prices' ages are computed
        if read_on > now + PRICE_DATE_GRACE:
            raise ValueError(f"price_date {value!r} is after today ({now.isoformat()}): a price is read, "
                             "not forecast")
        return value

    @property
    def name(self) -> str:
        """Catalogue key: provider/instance_type."""
        return f"{self.provider}/{self.instance_type}"

    @property
    def domain_gpus(self) -> int:
        """GPUs one NVLink/xGMI domain holds: TP and EP groups reach that far at NVLink speed (an
        NVL72 rack rented as 4-GPU trays: 72), at least the instance."""
        return max(self.num_gpus, self.scale_up_gpus or 0)

    @property
    def price_usd_per_gpu_hour(self) -> float:
        return self.price_usd_per_hour / self.num_gpus

    @property
    def rentable(self) -> bool:
        """False for `list/` rows: reference list prices of a GPU, not an instance anyone rents."""
        return self.provider != LIST_PROVIDER
