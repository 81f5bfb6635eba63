"""Flat option names (the CLI's `--snake-case` options and the batch sheet's columns) to the
pydantic Job and SolveQuery: the one mapping both front ends use, so they cannot drift apart."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from vramplan.models.catalogue.catalogue import load_stack_capabilities, load_stacks
from vramplan.models.catalogue.stack import plan_recompute, plan_zero, recompute_layers_conflict, with_preset
from vramplan.models.core.choices import NOT_IN_ANY, STACKS
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import ADAPTER_FIELDS, Job, RuntimeReserve
from vramplan.solver.query import Pins, SolveQuery

JOB_FIELDS = ("method", "lora_rank", "lora_dropout", "qlora_bits", "optimizer", "accounting", "attention", "kernels", "seq_len",
              "capacity_fraction", "memory_bound", "base_dtype")
# Training-stack recipe fields (models/catalogue/stack.py): unset ones come from the --stack preset.
STACK_FIELDS = ("stack", "master_weights", "loss", "loss_chunks", "selective", "recompute_layers",
                "optimizer_in_backward", "activation_offload", "qlora_prep", "fragmentation_fraction", "compile",
                "tp_overlap", "moe_dispatcher", "moe_a2a_overlap", "cuda_graphs")
RESERVE_FIELDS = ("cuda_context_mib", "cublas_workspace_mib", "nccl_mib")
PIN_FIELDS = ("zero", "recompute", "precision", "micro_batch", "offload", "num_gpus", "tp", "pp", "cp", "ep", "vpp",
              "sequence_parallel")
QUERY_FIELDS = ("global_batch", "tokens", "objective", "max_gpus", "max_nodes", "budget_usd", "deadline_hours",
                "pricing", "restart_overhead", "min_mfu", "max_days", "jurisdiction")
LIST_SEPARATORS = (";", ",")


def split_list(values: str | Iterable[str] | None) -> tuple[str, ...] | None:
    """Names separated by ';' or ',' (or several such strings, from a repeatable option)."""
    if values is None:
        return None
    texts = [values] if isinstance(values, str) else list(values)
    items = []
    for text in texts:
        listed = _json_names(text)
        if listed is not None:  # a JSON-lines or Parquet list cell, which the sheet reads as its JSON text
            items += listed
            continue
        for separator in LIST_SEPARATORS[1:]:
            text = text.replace(separator, LIST_SEPARATORS[0])
        items += [item.strip() for item in text.split(LIST_SEPARATORS[0]) if item.strip()]
    return tuple(items)


def _json_names(text: str) -> list[str] | None:
    """The names of a JSON array of strings (`["h100-sxm-80gb", "b200-180gb"]`), else None."""
    if not (text.strip().startswith("[") and text.strip().endswith("]")):
        return None
    try:
        names = json.loads(text)
    except ValueError:
        return None
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        return None
    return [name.strip() for name in names if name.strip()]


def _present(fields: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """The given fields that are set; None means the model's default."""
    return {name: fields[name] for name in names if fields.get(name) is not None}


def stack_job(**fields: Any) -> Job:
    """A Job as `--stack` builds it (the Python API's `vramplan.stack_job`): every recipe field not
    given takes the named stack's preset (catalogues/stacks.csv), which `Job(stack=...)` does not do
    (it sets the name alone: `Job(stack="unsloth")` kept hf's eager kernels and full AdamW, so its
    solve differed from the command line's). Bad input is one VramplanError naming the field."""
    from pydantic import ValidationError

    from vramplan.models.core.errors import closest_names, from_validation_error

    known = {*Job.model_fields, *RESERVE_FIELDS}
    for name, value in fields.items():
        if not isinstance(name, str) or name not in known:
            close = closest_names(str(name), known)
            hint = f"did you mean {', '.join(close)}?" if close else f"Job's fields: {', '.join(sorted(known))}"
            raise VramplanError(str(name), value, f"not a field of a job ({hint})")  # seqlen=8192 was dropped
    if "stack" in fields and not isinstance(fields["stack"], str):  # stack=1 was an AttributeError
        raise VramplanError("stack", repr(fields["stack"])[:80], "must be a stack's name, as text")
    reserve = fields.get("reserve")
    if reserve is not None:  # a RuntimeReserve or its fields (it was dropped, keeping the defaults)
        if isinstance(reserve, RuntimeReserve):
            reserve = reserve.model_dump()
        if not isinstance(reserve, Mapping):
            raise VramplanError("reserve", reserve, "must be a RuntimeReserve or a mapping of its fields")
        fields = {**{k: v for k, v in fields.items() if k != "reserve"}, **reserve}
        if (extra := next((k for k in reserve if k not in RESERVE_FIELDS), None)) is not None:
            raise VramplanError(f"reserve.{extra}", reserve[extra], f"not a field of RuntimeReserve ({', '.join(RESERVE_FIELDS)})")
    try:
        return job_from_fields(fields)
    except ValidationError as error:
        raise from_validation_error(error, fields) from None


def job_from_fields(fields: Mapping[str, Any], refused_later: bool = False) -> Job:
    """Raises pydantic.ValidationError (callers turn it into a one-line VramplanError). Unset recipe
    fields take the --stack preset's value (catalogues/stacks.csv). A front end that refuses the
    adapter fields a job cannot use in its own words (refuse_contradictions, after this, on what the
    user gave) passes refused_later: they are left out here, where Job would refuse them first."""
    if stack_list(fields.get("stack")) or fields.get("stack") == "any":
        raise VramplanError("stack", fields["stack"], "a job runs on one stack (several, or any, are for solve and batch)")
    fields = with_preset(fields, load_stacks())
    if refused_later:
        method = fields.get("method") or "full"
        unused = (ADAPTER_FIELDS if method == "full" else ()) + (("qlora_bits",) if method != "qlora" else ())
        fields = {name: value for name, value in fields.items() if name not in unused}
    job = _present(fields, JOB_FIELDS + STACK_FIELDS)
    targets = split_list(fields.get("lora_targets"))
    if targets:
        job["lora_targets"] = targets
    elif targets is not None:  # '' or ',,,': it adapted every linear module, as if left out
        raise VramplanError("lora_targets", fields["lora_targets"], "names no module; leave it out to adapt every "
                                                                    "linear module")
    return Job(**job, reserve=RuntimeReserve(**_present(fields, RESERVE_FIELDS)))


def refuse_contradictions(given: Callable[[str], bool], values: Mapping[str, Any], job: Job,
                          spell: Callable[[str], str] = lambda name: name, prefix: str = "") -> None:
    """Fields that cannot mean anything with the job's others are bad input, never silently ignored:
    `given(name)` says whether the user set the field (a command-line option typed, a batch cell
    filled), `spell` and `prefix` name it as the user wrote it (`lora-rank` / `--method`, or the
    column `lora_rank` / `method`)."""
    if job.method == "full":
        for name in ADAPTER_FIELDS:  # qlora_bits: qlora's alone, below
            if given(name):
                raise VramplanError(spell(name), values[name], f"applies to {prefix}method lora or qlora; "
                                                               f"this job is {prefix}method full")
    if job.method != "qlora" and given("qlora_bits"):
        raise VramplanError(spell("qlora_bits"), values["qlora_bits"], f"applies to {prefix}method qlora, not {job.method}")
    if given("loss_chunks") and job.loss != "chunked":
        raise VramplanError(spell("loss_chunks"), values["loss_chunks"], f"applies to {prefix}loss chunked; the loss is {job.loss}")
    if given("recompute_layers") and (why := recompute_layers_conflict(values.get("recompute"))) is not None:
        raise VramplanError(spell("recompute_layers"), values["recompute_layers"], f"applies to {prefix}recompute full; {why}")
    if given("qlora_prep") and job.method != "qlora":
        raise VramplanError(spell("qlora_prep"), values["qlora_prep"], f"applies to {prefix}method qlora, not {job.method}")
    if given("selective") and values.get("recompute") not in (None, "", "selective"):
        raise VramplanError(spell("selective"), values["selective"], f"applies to {prefix}recompute selective; the "
                                                                     f"recompute is {values['recompute']}")


def stack_list(value: Any) -> tuple[str, ...]:
    """`any` (every current stack: not custom nor a replaced release, NOT_IN_ANY) or several stacks
    separated by ',' or ';': the stacks a search chooses between; () for one stack (or none given)."""
    if not isinstance(value, str):
        return ()
    names = split_list(value) or ()
    if names == ("any",):
        return tuple(s for s in STACKS if s not in NOT_IN_ANY)
    if "any" in names:  # it reached job_from_fields as a stack name: "several, or any, are for solve", from solve
        raise VramplanError("stack", value, "any means every current stack, so it stands alone: give `any`, or list "
                                            "the stacks (custom among them)")
    return tuple(dict.fromkeys(names)) if len(names) > 1 else ()


def named_list(fields: Mapping[str, Any], name: str) -> tuple[str, ...]:
    """The names a restriction allows (() = no restriction: not given). Given, it names at least one:
    `--gpu ""` or a cell of ';' searched every GPU before (a fleet job's `pools` cell, every pool)."""
    value = fields.get(name)
    names = split_list(value) or ()
    if value is not None and not names and (not isinstance(value, (tuple, list)) or value):
        raise VramplanError(name, value if isinstance(value, str) else ",".join(value), "names nothing; leave it "
                                                                                        "out to allow every one")
    return names


def query_from_fields(fields: Mapping[str, Any], **search: Any) -> SolveQuery:
    """The SolveQuery of flat fields; `search` sets what only one front end chooses (top_k, engine...)."""
    stacks = stack_list(fields.get("stack"))
    if stacks:
        fields = {**fields, "stack": stacks[0]}  # the job as the first stack fills it; the search restacks it
    return SolveQuery(
        model=fields["model"],
        job=job_from_fields(fields, refused_later=True),  # both callers refuse contradictions themselves
        stacks=stacks,
        gpus=named_list(fields, "gpus"),
        providers=named_list(fields, "providers"),
        regions=named_list(fields, "regions"),
        countries=named_list(fields, "countries"),
        pins=Pins(**_present(fields, PIN_FIELDS)),
        **_present(fields, QUERY_FIELDS),
        **search,
    )


def estimate_recompute(fields: Mapping[str, Any]) -> str:
    """`estimate`'s recompute mode: the explicit option, else the --stack preset's default (one the
    stack runs on the fields' num_gpus)."""
    return plan_recompute(fields, load_stacks(), load_stack_capabilities())


def estimate_zero(fields: Mapping[str, Any]) -> int:
    """`estimate`'s ZeRO stage: the explicit option, else 0 (a stack's sharded stage where it
    shards every multi-GPU run)."""
    return plan_zero(fields, load_stack_capabilities())
