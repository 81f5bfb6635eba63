"""What the saved-tensors probe records (tools/saved_tensors_probe.py): one entry per tensor autograd
saves for backward, the per-region byte sums and the whole result."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any


@dataclass
class SavedEntry:
    idx: int
    region: str                 # "layer.0", "model.embed_tokens", "lm_head", "loss", ...
    layer: int | None
    module: str                 # innermost module (full name)
    submodule: str              # innermost module relative to the layer/region
    torch_func: str | None      # innermost torch-level function executing when saved
    node: str | None            # autograd node holding it (e.g. "MmBackward0")
    attr: str | None            # attribute on that node (e.g. "_saved_self")
    producer: str | None        # tensor.grad_fn name (what produced the saved tensor)
    src: str | None             # innermost transformers source line ("file:line fn")
    torch_src: str | None       # innermost torch python source line
    shape: tuple
    stride: tuple
    dtype: str
    numel: int
    view_bytes: int             # numel * element_size
    storage: int                # storage key (data_ptr)
    storage_bytes: int
    kind: str = "activation"    # "activation" | "autocast_weight_copy"
    shared_with: list = field(default_factory=list)  # idx of other entries on this storage

    def row(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class RegionSummary:
    region: str
    unique_bytes: int           # each storage saved by this region counted once
    exclusive_bytes: int        # storages saved ONLY by this region
    shared_bytes: int           # storages this region saves that other regions also save
    n_entries: int


@dataclass
class ProbeResult:
    model_type: str
    config_kwargs: dict
    batch: int
    seq_len: int
    dtype: str
    attn_implementation: str
    gradient_checkpointing: Any
    autocast: str | None
    entries: list[SavedEntry]
    excluded_param_entries: list[SavedEntry]
    regions: dict[str, RegionSummary]
    total_unique_bytes: int
    config: dict
    loss: float
    # storages held by the model output (logits, KV cache if use_cache) that are NOT saved tensors:
    # {"logits": bytes, "cache": bytes}
    output_held: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    # --- convenience -------------------------------------------------
    @property
    def layer_indices(self) -> list[int]:
        return sorted({e.layer for e in self.entries if e.layer is not None})

    def layer_entries(self, i: int) -> list[SavedEntry]:
        return [e for e in self.entries if e.layer == i]

    def layer_bytes(self, i: int, exclusive: bool = True) -> int:
        r = self.regions[f"layer.{i}"]
        return r.exclusive_bytes if exclusive else r.unique_bytes

    def cross_region_storages(self) -> list[tuple[int, int, list[str]]]:
        """(storage, bytes, regions) for storages saved by more than one region."""
        by = defaultdict(set)
        nb = {}
        for e in self.entries:
            by[e.storage].add(e.region)
            nb[e.storage] = e.storage_bytes
        return [(k, nb[k], sorted(v)) for k, v in by.items() if len(v) > 1]
