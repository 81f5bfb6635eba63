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

LIST_PROVIDER = "list"  # offerings.csv rows that are reference prices, not rentable instances
_NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9.\-]*$")


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
    memory_marketed_gb: float = Field(gt=0, description="capacity as marketed, decimal GB")
    memory_usable_mib: int = Field(
        gt=0, description="total memory the driver reports (nvidia-smi / rocm-smi), MiB; the bound uses this"
    )
    bf16_dense_tflops: float = Field(ge=0, description="dense BF16 tensor TFLOPS; 0 = unsupported")
    fp16_dense_tflops: float = Field(gt=0, description="dense FP16 tensor TFLOPS")
    fp32_dense_tflops: float = Field(gt=0, description="dense FP32 (IEEE, non-tensor) TFLOPS")
    fp8_supported: bool
    fp8_dense_tflops: float = Field(ge=0, description="dense FP8 tensor TFLOPS; 0 when unsupported")
    hbm_bandwidth_gb_per_s: float = Field(gt=0)
    intra_node_bandwidth_gb_per_s: float = Field(
        gt=0, description="GPU-to-GPU bandwidth inside a node, per GPU, one direction"
    )
    gpus_per_node: int = Field(ge=1, le=72)
    network_bandwidth_gb_per_s: float = Field(
        gt=0, description="scale-out network bandwidth per GPU across nodes, one direction"
    )
    source: str

    @field_validator("name")
    @classmethod
    def _name_is_a_key(cls, value: str) -> str:
        if not _NAME_PATTERN.match(value):
            raise ValueError(f"name {value!r} must be lower-case letters, digits, '.' and '-'")
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
    num_gpus: int = Field(ge=1, le=72, description="GPUs per instance")
    price_usd_per_hour: float = Field(gt=0, description="on-demand USD per instance-hour")
    spot_price_usd_per_hour: float | None = Field(default=None, gt=0, description="spot USD per instance-hour")
    host_memory_gib: float = Field(gt=0, description="host (CPU) RAM per instance, GiB")
    network_bandwidth_gb_per_s: float | None = Field(
        default=None, gt=0,
        description="scale-out bandwidth per GPU between instances, one direction, GB/s; empty = the GPU's usual fabric",
    )
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

    @property
    def rentable(self) -> bool:
        """False for `list/` rows: reference list prices of a GPU, not an instance anyone rents."""
        return self.provider != LIST_PROVIDER


MlpKind = Literal["gelu", "swiglu", "geglu"]
NormKind = Literal["layernorm", "rmsnorm"]


class Architecture(_Row):
    """A transformer decoder (one row of catalogues/architectures.csv, or a Hugging Face config.json)."""

    name: str
    model_type: Literal["gpt2", "llama", "mistral", "mixtral", "qwen2", "gemma2"] = Field(
        description="Hugging Face model_type whose module layout the counts and activations follow"
    )
    num_layers: int = Field(ge=1, le=1024)
    hidden_size: int = Field(ge=1, le=1_000_000)
    num_attention_heads: int = Field(ge=1)
    num_kv_heads: int = Field(ge=1)
    head_dim: int = Field(ge=1)
    intermediate_size: int = Field(ge=1, description="MLP width (per expert for MoE)")
    vocab_size: int = Field(ge=1)
    max_position_embeddings: int = Field(ge=1)
    tie_word_embeddings: bool
    learned_position_embeddings: bool
    qkv_bias: bool
    linear_bias: bool = Field(description="bias on the attention output and MLP linears (GPT-2 style)")
    mlp_kind: MlpKind
    norm_kind: NormKind
    norms_per_layer: int = Field(ge=1, le=4)
    dropout_prob: float = Field(ge=0, lt=1, description="dropout on embeddings, attention probs, residuals")
    num_experts: int = Field(ge=1, description="1 for a dense MLP")
    experts_per_token: int = Field(ge=1)
    final_logit_softcapping: float | None = Field(default=None, gt=0)
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
