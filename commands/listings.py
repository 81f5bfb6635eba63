"""`vramplan gpus`, `models`, `offerings` and `stacks`: the catalogues as tables, JSON or CSV."""

from __future__ import annotations

from typing import Any

import click

from vramplan.commands.options import OnceCommand, catalogue_options, open_catalogue, output_options

# Table columns (key, header), most telling first: a narrow screen keeps those that fit. JSON and CSV
# carry every catalogue field under its own name.
GPU_COLUMNS = [("name", "name"), ("memory_usable_gib", "usable GiB"), ("bf16_dense_tflops", "bf16 TFLOPS"),
               ("fp8_dense_tflops", "fp8 TFLOPS"), ("hbm_bandwidth_gb_per_s", "HBM GB/s"),
               ("intra_node_bandwidth_gb_per_s", "node GB/s"), ("network_bandwidth_gb_per_s", "net GB/s"),
               ("gpus_per_node", "GPUs/node")]
MODEL_COLUMNS = [("name", "name"), ("params", "params"), ("model_type", "type"), ("num_layers", "layers"),
                 ("hidden_size", "hidden"), ("num_attention_heads", "heads"), ("num_kv_heads", "kv heads"),
                 ("intermediate_size", "ffn"), ("vocab_size", "vocab"), ("num_experts", "experts")]
OFFERING_COLUMNS = [("name", "name"), ("gpu", "gpu"), ("num_gpus", "GPUs"), ("price_usd_per_hour", "USD/h"),
                    ("price_usd_per_gpu_hour", "USD/GPU-h"), ("spot_price_usd_per_hour", "spot USD/h"),
                    ("price_1yr_usd_per_hour", "1yr USD/h"), ("price_3yr_usd_per_hour", "3yr USD/h"),
                    ("host_memory_gib", "host GiB"), ("network", "network GB/s per GPU"), ("place", "regions"),
                    ("price_date", "priced")]


def _listing(rows: list[dict[str, Any]], table_rows: list[dict[str, Any]], columns: list[tuple[str, str]],
             title: str, options: dict[str, Any]) -> None:
    from vramplan.commands import output, render_text  # the renderers load when a listing is printed

    output.claim(options, [("output", options["output"])])
    fmt = output.chosen_format(options)
    if fmt == "json":
        text = output.json_text(rows)
    elif fmt == "csv":
        text = output.csv_text([output.flatten(row) for row in rows])  # nested fields as `runs.tp` columns
    else:
        text = render_text.listing_table(table_rows, columns, title, output.screen_for(options["output"]))
    output.emit(text, options["output"])


@click.command(cls=OnceCommand)
@catalogue_options
@output_options
def gpus(**options: Any) -> None:
    """List the GPU catalogue."""
    from vramplan.models.core.units import BYTES_PER_GIB, BYTES_PER_MIB

    catalogue = open_catalogue(options)
    rows = [g.model_dump() for g in catalogue.gpus.values()]
    table_rows = [row | {"memory_usable_gib": f"{row['memory_usable_mib'] * BYTES_PER_MIB / BYTES_PER_GIB:,.2f}"}
                  for row in rows]
    _listing(rows, table_rows, GPU_COLUMNS, "GPUs (dense TFLOPS; usable memory as the driver reports)", options)


@click.command(cls=OnceCommand)
@catalogue_options
@output_options
def models(**options: Any) -> None:
    """List the architecture catalogue with exact parameter counts."""
    from vramplan.commands.render_text import count
    from vramplan.models.architecture.params import count_params

    catalogue = open_catalogue(options)
    rows = []
    for arch in catalogue.architectures.values():
        counts = count_params(arch)
        rows.append({"name": arch.name, "num_params": counts.total, "num_active_params": counts.active,
                     **arch.model_dump(exclude={"name"})})
    table_rows = [row | {"params": count(row["num_params"])} for row in rows]
    _listing(rows, table_rows, MODEL_COLUMNS, "Architectures (parameter counts exact in JSON and CSV)", options)


@click.command(cls=OnceCommand)
@catalogue_options
@output_options
def offerings(**options: Any) -> None:
    """List the offerings (how GPUs are rented) with their dated prices."""
    catalogue = open_catalogue(options)
    rows = [{"name": o.name, **o.model_dump(), "price_usd_per_gpu_hour": round(o.price_usd_per_gpu_hour, 4)}
            for o in catalogue.offerings.values()]
    prices = ("price_usd_per_hour", "spot_price_usd_per_hour", "price_usd_per_gpu_hour", "price_1yr_usd_per_hour",
              "price_3yr_usd_per_hour")
    gpus = catalogue.gpus
    # The table names the interconnect: NVLink (or the vendor's) inside an instance (its domain when
    # it spans instances, NVL72), the scale-out network between instances (empty in offerings.csv =
    # the GPU's usual fabric) and its name, per GPU, one way; and where the price applies.
    table_rows = [row | {key: f"{row[key]:,.2f}" for key in prices if row[key] is not None}
                  | {"network": _network_cell(o, gpus[o.gpu]), "place": _place_cell(o)}
                  for row, o in zip(rows, catalogue.offerings.values())]
    _listing(rows, table_rows, OFFERING_COLUMNS, "Offerings (USD per instance-hour; dated, prices go stale)", options)


def _network_cell(offering: Any, gpu: Any) -> str:
    domain = f" x{offering.scale_up_gpus}" if offering.scale_up_gpus and offering.scale_up_gpus > offering.num_gpus else ""
    between = offering.network_bandwidth_gb_per_s or gpu.network_bandwidth_gb_per_s
    fabric = f" ({offering.fabric})" if offering.fabric else ""
    return f"{gpu.intra_node_bandwidth_gb_per_s:,.4g} inside{domain}, {between:,.4g} between{fabric}"


def _place_cell(offering: Any) -> str:
    """Regions where the price applies, the first two and how many more; '-' for none (list rows)."""
    regions = [r for r in offering.regions.split(";") if r]
    if not regions:
        return "-"
    more = f" +{len(regions) - 2}" if len(regions) > 2 else ""
    return ", ".join(regions[:2]) + more


STACK_COLUMNS = [("name", "name"), ("master_weights", "master"), ("loss", "loss"), ("recompute", "recompute"),
                 ("selective", "selective"), ("optimizer", "optimizer"), ("optimizer_in_backward", "opt-in-bwd"),
                 ("activation_offload", "act offload"), ("kernels", "kernels"), ("accounting", "accounting"),
                 ("qlora_prep", "qlora prep"), ("fragmentation_fraction", "frag"), ("compile", "compile"),
                 ("tp_overlap", "tp overlap"), ("moe_dispatcher", "moe dispatcher"), ("moe_a2a_overlap", "a2a overlap"),
                 ("cuda_graphs", "cuda graphs")]


@click.command(cls=OnceCommand)
@output_options
def stacks(**options: Any) -> None:
    """List the training stacks and the recipe defaults each sets (catalogues/stacks.csv)."""
    from vramplan.models.catalogue.catalogue import load_stack_capabilities, load_stacks

    capabilities = load_stack_capabilities()
    rows, table_rows = [], []
    for preset in load_stacks().values():
        runs = {key: sorted(value) if isinstance(value, frozenset) else value
                for key, value in capabilities[preset.name].model_dump(exclude={"name"}).items()}
        rows.append({**preset.model_dump(), "runs": runs})
        table_rows.append({**preset.model_dump(), "runs": _runs_label(runs)})
    _listing(rows, table_rows, STACK_COLUMNS + [("runs", "runs")],
             "Training stacks (recipe defaults and what each runs; sources: --format json)", options)


def _runs_label(runs: dict[str, Any]) -> str:
    """'TP+SP PP/v CP EP, ZeRO 0-1, 1 node': the parallelism and sharding a stack runs."""
    degrees = [("TP+SP" if runs["sequence_parallel"] else "TP") if runs["tp"] else "",
               ("PP/v" if runs["vpp"] else "PP") if runs["pp"] else "", "CP" if runs["cp"] else "",
               "EP" if runs["ep"] else ""]
    parallel = " ".join(d for d in degrees if d) or "DP only"
    nodes = "" if runs["multi_node"] else (", 1 node" if runs["multi_gpu"] else ", 1 GPU")
    return f"{parallel}, ZeRO {' '.join(str(z) for z in runs['zero_stages'])}{nodes}"
