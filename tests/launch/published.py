"""What the launch-config tests share: the published-name checker, the DeepSpeed table and check (the
deepspeed writer's dict is also the hf stack's inline `deepspeed`), and jobs as the CLI builds them.

A table maps every key a stack publishes (of those the writers may emit) to its domain: a type tag,
a tuple of the allowed values, a nested table (a dict, checked recursively), or a predicate.

DeepSpeed v0.19.5 (cf44300): deepspeed/runtime/constants.py (TRAIN_BATCH_SIZE,
TRAIN_MICRO_BATCH_SIZE_PER_GPU, GRADIENT_ACCUMULATION_STEPS), runtime/precision_config.py (bf16,
fp16: enabled), runtime/zero/config.py DeepSpeedZeroConfig (stage, offload_optimizer, offload_param,
overlap_comm, contiguous_gradients), runtime/zero/offload_config.py OffloadDeviceEnum (none, cpu,
nvme) and pin_memory, runtime/tensor_parallel/config.py TPTrainingConfig.autotp_size,
runtime/config.py `config["sequence_parallel_size"]` (Ulysses; docs/_tutorials/ulysses-alst-
sequence-parallelism.md), module_inject/auto_ep_config.py parse_autoep_config (expert_parallel:
enabled, autoep_size; docs/_pages/config-json.md "Expert Parallel (AutoEP)"). The config objects
reject unknown keys.
"""

from __future__ import annotations

from typing import Any

from vramplan.models.catalogue.catalogue import load_stacks
from vramplan.models.catalogue.stack import with_preset
from vramplan.models.core.setup import Job, Plan

INT, BOOL, FLOAT, STR, FLAG = "int", "bool", "float", "str", "store_true"


def list_of_str(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


_OFFLOAD = {"device": ("none", "cpu", "nvme"), "pin_memory": BOOL}
DEEPSPEED = {
    "train_batch_size": INT, "train_micro_batch_size_per_gpu": INT, "gradient_accumulation_steps": INT,
    "bf16": {"enabled": BOOL}, "fp16": {"enabled": BOOL},
    "zero_optimization": {"stage": (0, 1, 2, 3), "offload_optimizer": _OFFLOAD, "offload_param": _OFFLOAD,
                          "overlap_comm": BOOL, "contiguous_gradients": BOOL},
    "tensor_parallel": {"autotp_size": INT},
    "sequence_parallel_size": INT,
    "expert_parallel": {"enabled": BOOL, "autoep_size": INT},
}


def in_domain(value: object, domain: object) -> bool:
    if isinstance(domain, tuple):
        return value in domain and type(value) is type(next(d for d in domain if d == value))
    if callable(domain):
        return bool(domain(value))
    kinds: dict[Any, type] = {INT: int, BOOL: bool, FLOAT: float, STR: str}
    return isinstance(value, kinds[domain]) and (domain != INT or not isinstance(value, bool))


def check_keys(data: dict, table: dict, where: str = "") -> None:
    """Every key of `data` is in `table` and every value in its domain (nested tables recursively)."""
    for key, value in data.items():
        assert key in table, f"{where}{key} is not a published name"
        domain = table[key]
        if isinstance(domain, dict):
            assert isinstance(value, dict), (where, key, value)
            check_keys(value, domain, f"{where}{key}.")
        else:
            assert in_domain(value, domain), (where, key, value)


def job(stack: str, **fields: object) -> Job:
    """The job as `estimate --stack STACK` builds it: the stack's preset fills every unset recipe option."""
    return Job(**with_preset({"stack": stack, "seq_len": 8192, **fields}, load_stacks()))


def check_deepspeed(data: dict, plan: Plan) -> None:
    """The DeepSpeed JSON (also the hf stack's inline `deepspeed`): published names, the plan's values."""
    check_keys(data, DEEPSPEED)
    # with AutoTP or Ulysses ranks share a batch: DeepSpeed derives train_batch_size over its DP ranks
    assert data.get("train_batch_size") == (plan.global_batch if plan.tp == plan.cp == 1 else None)
    assert (data["train_micro_batch_size_per_gpu"], data["gradient_accumulation_steps"]) == (plan.micro_batch, plan.grad_accum)
    assert data["zero_optimization"]["stage"] == plan.zero
    assert data["bf16"]["enabled"] == (plan.precision in ("bf16", "fp8")) and data["fp16"]["enabled"] == (plan.precision == "fp16")
    assert ("offload_optimizer" in data["zero_optimization"]) == (plan.offload != "none")
    assert ("offload_param" in data["zero_optimization"]) == (plan.offload == "optimizer+params")
    assert data.get("tensor_parallel", {"autotp_size": 1})["autotp_size"] == plan.tp
    assert data.get("sequence_parallel_size", 1) == plan.cp
    assert data.get("expert_parallel", {"autoep_size": 1})["autoep_size"] == plan.ep


def assert_refused(stack: str, fields: dict, plan: Plan, field: str) -> None:
    """The stack's writer refuses what its configuration cannot express: one line naming `field`."""
    import pytest

    from vramplan.launch.configs import LaunchModel, launch_config
    from vramplan.models.core.errors import VramplanError

    with pytest.raises(VramplanError) as error:
        launch_config(job(stack, **fields), plan, LaunchModel(32))
    assert error.value.field == field and "\n" not in str(error.value)
