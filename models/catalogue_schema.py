"""Pydantic schemas of the three catalogues: the single source of truth for their columns.

The CSV header of each catalogue must equal the field order of its model
(tests/test_catalogues.py checks it), and catalogues/README.md documents every
column. Units are in the column names: GB = 1e9 bytes, GiB/MiB = 2^30/2^20 bytes,
bandwidths in GB/s (decimal), throughput in dense (non-sparse) TFLOPS.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from vramplan.models.errors import VramplanError
from vramplan.models.numbers import Count, Real

_NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9.\-]*$")

# Domains of the numeric columns (catalogues/README.md): plausible hardware and prices, all finite.
MIN_TFLOPS, MAX_TFLOPS = 0.1, 100_000  # per GPU, dense (B200: 2,250 bf16; V100: 15.7 fp32)
MIN_GB_PER_S, MAX_GB_PER_S = 0.1, 100_000  # per GPU, one direction (B200 HBM3e: 8,000; 1 Gb/s NIC: 0.125)
MIN_USD_PER_HOUR, MAX_USD_PER_HOUR = 0.0001, 10_000  # per instance-hour (p5en.48xlarge: about 63)


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)

    @field_validator("source", check_fields=False)
    @classmethod
    def _source_is_not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("every catalogue row needs a source")
        return value


class GpuSpec(_Row):
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


class Offering(_Row):
    """One way to buy GPUs (one row of catalogues/offerings.csv): an instance type of a provider."""

    provider: str = Field(description="e.g. aws, lambda, runpod, list")
    instance_type: str
    gpu: str = Field(description="a name in the GPU catalogue")
    num_gpus: Count = Field(ge=1, le=72, description="GPUs per instance")
    price_usd_per_hour: Real = Field(ge=MIN_USD_PER_HOUR, le=MAX_USD_PER_HOUR, description="on-demand USD per instance-hour")
    spot_price_usd_per_hour: Real | None = Field(default=None, ge=MIN_USD_PER_HOUR, le=MAX_USD_PER_HOUR, description="spot USD per instance-hour")
    host_memory_gib: Real = Field(ge=1, le=1_000_000, description="host (CPU) RAM per instance, GiB")
    price_date: str = Field(description="when the price was read, YYYY-MM or YYYY-MM-DD")
    source: str

    @field_validator("provider", "instance_type", "gpu")
    @classmethod
    def _no_slash(cls, value: str) -> str:
        if not value or "/" in value:
            raise ValueError(f"{value!r} must be non-empty and contain no '/'")
        return value

    @field_validator("price_date")
    @classmethod
    def _is_a_date(cls, value: str) -> str:
        if not re.match(r"^\d{4}-\d{2}(-\d{2})?$", value):
            raise ValueError(f"price_date {value!r} must be YYYY-MM or YYYY-MM-DD")
        return value

    @property
    def name(self) -> str:
        """Catalogue key: provider/instance_type."""
        return f"{self.provider}/{self.instance_type}"

    @property
    def price_usd_per_gpu_hour(self) -> float:
        return self.price_usd_per_hour / self.num_gpus


MlpKind = Literal["gelu", "swiglu", "geglu"]
NormKind = Literal["layernorm", "rmsnorm"]


class Architecture(_Row):
    """A transformer decoder (one row of catalogues/architectures.csv, or a Hugging Face config.json)."""

    name: str
    model_type: Literal["gpt2", "llama", "mistral", "mixtral", "qwen2", "gemma2"] = Field(
        description="Hugging Face model_type whose module layout the counts and activations follow"
    )
    num_layers: Count = Field(ge=1, le=1024)
    hidden_size: Count = Field(ge=1, le=1_000_000)
    num_attention_heads: Count = Field(ge=1, le=65_536)
    num_kv_heads: Count = Field(ge=1, le=65_536)
    head_dim: Count = Field(ge=1, le=65_536)
    intermediate_size: Count = Field(ge=1, le=10_000_000, description="MLP width (per expert for MoE)")
    vocab_size: Count = Field(ge=1, le=100_000_000)
    max_position_embeddings: Count = Field(ge=1, le=1_000_000_000)
    tie_word_embeddings: bool
    learned_position_embeddings: bool
    qkv_bias: bool
    linear_bias: bool = Field(description="bias on the attention output and MLP linears (GPT-2 style)")
    mlp_kind: MlpKind
    norm_kind: NormKind
    norms_per_layer: Count = Field(ge=1, le=4)
    dropout_prob: Real = Field(ge=0, lt=1, description="dropout on embeddings, attention probs, residuals")
    num_experts: Count = Field(ge=1, le=4096, description="1 for a dense MLP")
    experts_per_token: Count = Field(ge=1, le=4096)
    final_logit_softcapping: Real | None = Field(default=None, gt=0, le=1_000_000)
    source: str

    @model_validator(mode="after")
    def _shapes_are_consistent(self) -> Architecture:
        if self.num_attention_heads % self.num_kv_heads:
            raise VramplanError(
                "num_kv_heads", self.num_kv_heads, f"must divide num_attention_heads={self.num_attention_heads}"
            )
        if self.experts_per_token > self.num_experts:
            raise VramplanError(
                "experts_per_token", self.experts_per_token, f"must not exceed num_experts={self.num_experts}"
            )
        return self

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1
