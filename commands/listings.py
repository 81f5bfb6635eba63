"""`vramplan gpus`, `models`, `offerings` and `stacks`: the catalogues as tables, JSON or CSV."""

from __future__ import annotations

from typing import Any

import click

from vramplan.commands import output
from vramplan.commands.options import catalogue_options, open_catalogue, output_options
from vramplan.models.catalogue import Catalogue, load_stacks
from vramplan.models.params import count_params


def _listing(rows: list[dict[str, Any]], columns: list[str], title: str, options: dict[str, Any]) -> None:
    fmt = options["output_format"]
    if fmt == "json":
        text = output.json_text(rows)
    elif fmt == "csv":
        text = output.csv_text(rows)
    else:
        text = output.listing_table(rows, columns, title)
    output.emit(text, options["output"])


@click.command()
@catalogue_options
@output_options
def gpus(**options: Any) -> None:
    """List the GPU catalogue."""
    catalogue: Catalogue = open_catalogue(options)
    rows = [g.model_dump() for g in catalogue.gpus.values()]
    columns = ["name", "memory_usable_mib", "bf16_dense_tflops", "fp8_dense_tflops", "hbm_bandwidth_gb_per_s",
               "intra_node_bandwidth_gb_per_s", "network_bandwidth_gb_per_s", "gpus_per_node"]
    _listing(rows, columns, "GPUs (dense TFLOPS; usable MiB as the driver reports)", options)


@click.command()
@catalogue_options
@output_options
def models(**options: Any) -> None:
    """List the architecture catalogue with exact parameter counts."""
    catalogue = open_catalogue(options)
    rows = []
    for arch in catalogue.architectures.values():
        counts = count_params(arch)
        rows.append({"name": arch.name, "num_params": counts.total, "num_active_params": counts.active,
                     **arch.model_dump(exclude={"name"})})
    columns = ["name", "num_params", "model_type", "num_layers", "hidden_size", "num_attention_heads",
               "num_kv_heads", "intermediate_size", "vocab_size", "num_experts"]
    _listing(rows, columns, "Architectures (exact parameter counts)", options)


@click.command()
@catalogue_options
@output_options
def offerings(**options: Any) -> None:
    """List the offerings (how GPUs are rented) with their dated prices."""
    catalogue = open_catalogue(options)
    rows = [{"name": o.name, **o.model_dump(), "price_usd_per_gpu_hour": round(o.price_usd_per_gpu_hour, 4)}
            for o in catalogue.offerings.values()]
    columns = ["name", "gpu", "num_gpus", "price_usd_per_hour", "spot_price_usd_per_hour",
               "price_usd_per_gpu_hour", "host_memory_gib", "price_date"]
    _listing(rows, columns, "Offerings (USD per instance-hour; dated, prices go stale)", options)


@click.command()
@output_options
def stacks(**options: Any) -> None:
    """List the training stacks and the recipe defaults each sets (catalogues/stacks.csv)."""
    rows = [preset.model_dump() for preset in load_stacks().values()]
    columns = ["name", "master_weights", "loss", "recompute", "selective", "optimizer", "optimizer_in_backward",
               "activation_offload", "kernels", "accounting", "qlora_prep", "fragmentation_fraction"]
    _listing(rows, columns, "Training stacks (recipe defaults; sources: --format json)", options)
