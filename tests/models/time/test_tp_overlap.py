"""TP communication overlap as a recipe option (Job.tp_overlap, `--tp-overlap/--no-tp-overlap`, the
batch column `tp_overlap`, catalogues/stacks.csv and stack_capabilities.csv `tp_overlap`):
- the time model (models/time/parallel_time.py overlaps_tp, _tp_bytes): with sequence parallelism the
  forward's TP collectives hide behind the forward compute, exposed only beyond it (Megatron-LM
  --tp-comm-overlap: Transformer Engine userbuffers; torchtitan async TP: Inductor's micro-pipeline
  pass); the backward's and the recomputed forward's keep their place (Megatron: beside the
  backward GEMMs; torchtitan: exposed, SERIAL_TP_BACKWARD_STACKS);
- the solver's numpy mirror (solver/bound_arrays.py parallel_seconds_grid), cell for cell;
- the stack contract: megatron and custom run it, torchtitan only with torch.compile
  (distributed/tensor_parallel.py maybe_enable_async_tp raises without it), the others refuse it;
- the CLI option and the launch configurations (Megatron `--tp-comm-overlap`, torchtitan
  `[parallelism] enable_async_tensor_parallel`)."""

from __future__ import annotations

import json
import tomllib

import pytest
from helpers.catalogue import packaged_catalogue
from helpers.cli import assert_error_line, invoke
from helpers.parallel_grid import assert_the_four_terms, checked_grid

from vramplan.launch.configs import LaunchModel, launch_config
from vramplan.models.catalogue.catalogue import load_stack_capabilities, load_stacks
from vramplan.models.catalogue.stack_contract import job_refusal
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job, Plan
from vramplan.models.time.flops import plan_flops_per_token
from vramplan.models.time.parallel_time import (
    overlaps_tp,
    parallel_traffic,
    tp_time_s,
)
from vramplan.sheets.rows import INPUT_COLUMNS, parse_row
from vramplan.solver.query_fields import query_from_fields
from vramplan.solver.space_build import build_space

CATALOGUE = packaged_catalogue()
LLAMA_70B = CATALOGUE.architecture("llama-3.1-70b")
H100 = CATALOGUE.gpu("h100-sxm-80gb")
TP8 = {"gpu": H100.name, "num_gpus": 8, "tp": 8, "sequence_parallel": True, "grad_accum": 4}
BIG = 1e6  # seconds of compute: hides whatever may hide


def _job(stack: str, tp_overlap: bool, **fields) -> Job:
    return Job(seq_len=8192, stack=stack, tp_overlap=tp_overlap, **fields)


def test_the_option_applies_with_tp_and_sequence_parallelism_only() -> None:
    on = _job("megatron", True)
    assert overlaps_tp(on, Plan(**TP8))
    assert not overlaps_tp(on, Plan(**{**TP8, "sequence_parallel": False}))  # arguments.py asserts SP with it
    assert not overlaps_tp(on, Plan(**{**TP8, "tp": 1, "sequence_parallel": False}))
    assert not overlaps_tp(_job("megatron", False), Plan(**TP8))
    plan = Plan(**{**TP8, "sequence_parallel": False})
    assert tp_time_s(LLAMA_70B, on, plan, H100, 10.0) == tp_time_s(LLAMA_70B, _job("megatron", False), plan, H100, 10.0)


def test_megatron_hides_the_forward_collectives_behind_the_forward_compute() -> None:
    plan = Plan(**TP8)
    off, on = _job("megatron", False), _job("megatron", True)
    total = tp_time_s(LLAMA_70B, off, plan, H100, compute_s=0.0)  # no compute: every collective exposed
    assert tp_time_s(LLAMA_70B, on, plan, H100, compute_s=0.0) == pytest.approx(total)
    assert tp_time_s(LLAMA_70B, off, plan, H100, compute_s=BIG) == pytest.approx(total / 2)  # the forward's 2 of 4
    assert tp_time_s(LLAMA_70B, on, plan, H100, compute_s=BIG) == 0.0
    # exposed only beyond the forward compute: a forward of half the forward collectives' time hides half
    share = plan_flops_per_token(LLAMA_70B, on, plan).forward_share
    forward_s = total / 2
    assert tp_time_s(LLAMA_70B, on, plan, H100, compute_s=forward_s / 2 / share) == pytest.approx(
        forward_s / 2 + max(0.0, forward_s - forward_s / 2 / share * (1 - share)))


def test_torchtitan_async_tp_hides_the_forward_and_keeps_the_backward_exposed() -> None:
    plan = Plan(**TP8)
    off, on = _job("torchtitan", False, compile="model"), _job("torchtitan", True, compile="model")
    vanilla = tp_time_s(LLAMA_70B, off, plan, H100, compute_s=BIG)
    assert vanilla == tp_time_s(LLAMA_70B, off, plan, H100, compute_s=0.0)  # SERIAL_TP_BACKWARD_STACKS
    assert tp_time_s(LLAMA_70B, on, plan, H100, compute_s=BIG) == pytest.approx(vanilla / 2)  # the backward's 2 of 4
    assert tp_time_s(LLAMA_70B, on, plan, H100, compute_s=0.0) == pytest.approx(vanilla)


@pytest.mark.parametrize("stack", ["megatron", "torchtitan"])
def test_the_recomputed_forward_runs_in_the_backward(stack: str) -> None:
    """Full recompute re-runs the forward collectives inside the backward: under the option they sit
    with the backward's (Megatron: hidden behind the backward compute; torchtitan: exposed)."""
    plan = Plan(**{**TP8, "recompute": "full"})
    traffic = parallel_traffic(LLAMA_70B, _job(stack, True, compile="model"), plan)
    none = parallel_traffic(LLAMA_70B, _job(stack, True, compile="model"), Plan(**TP8))
    assert traffic.tp_forward_overlapped_bytes == none.tp_forward_overlapped_bytes > 0
    if stack == "megatron":
        assert traffic.tp_exposed_bytes == 0.0
        assert traffic.tp_overlapped_bytes == pytest.approx(2 * none.tp_overlapped_bytes)
    else:
        assert traffic.tp_overlapped_bytes == 0.0
        assert traffic.tp_exposed_bytes == pytest.approx(2 * none.tp_exposed_bytes)


@pytest.mark.parametrize("stack", ["megatron", "torchtitan"])
def test_parallel_seconds_equal_the_four_terms_with_the_overlap(stack: str) -> None:
    job = _job(stack, True, compile="model")
    for plan in (Plan(**TP8), Plan(**{**TP8, "recompute": "full"}),
                 Plan(**{**TP8, "num_gpus": 64, "pp": 8, "vpp": 5, "grad_accum": 64})):
        for compute in (0.0, 0.05, 0.5, 30.0):
            assert_the_four_terms(LLAMA_70B, job, plan, H100, compute)


@pytest.mark.parametrize("stack", ["megatron", "torchtitan"])
def test_the_solver_grid_is_the_scalar_function_to_the_bit(stack: str) -> None:
    """parallel_seconds_grid against Tables.parallel_s on every cell of a Llama 70B space with the
    option on (tests/solver/test_bound_arrays.py's check)."""
    fields = {"tokens": 1e9, "model": "llama-3.1-70b", "seq_len": 8192, "global_batch": 128, "max_gpus": 128,
              "stack": stack, "gpus": "h100-sxm-80gb", "tp_overlap": True,
              **({"compile": "model+loss"} if stack == "torchtitan" else {})}
    space = build_space(CATALOGUE, query_from_fields(fields))
    cells, rows = checked_grid(space)
    hidden = sum(bool(t.cells(space.tables)[1]["tp_forward_overlapped_bytes"][i].any()) for t, i in rows)
    assert cells > 40 and hidden


def test_every_packaged_stack_defaults_off_and_the_contract_names_who_runs_it() -> None:
    assert not any(preset.tp_overlap for preset in load_stacks().values())  # each release's default
    caps = load_stack_capabilities()
    assert {name: c.tp_overlap for name, c in caps.items() if c.tp_overlap != "false"} == {
        "megatron": "true", "torchtitan": "compile", "torchtitan-root-fsdp": "compile", "custom": "true"}
    for stack in ("hf", "deepspeed", "torchtune", "litgpt", "unsloth"):
        assert job_refusal(caps[stack], _job(stack, True)) == ("tp_overlap", True, "TP communication overlap")
    assert job_refusal(caps["megatron"], _job("megatron", True)) is None
    assert job_refusal(caps["custom"], _job("custom", True)) is None
    assert job_refusal(caps["torchtitan"], _job("torchtitan", True))[0] == "tp_overlap"  # needs torch.compile
    assert job_refusal(caps["torchtitan"], _job("torchtitan", True, compile="model")) is None
    assert job_refusal(caps["torchtitan"], _job("torchtitan", False)) is None


ESTIMATE = ["estimate", "--model", "llama-3.1-70b", "--gpu", "h100-sxm-80gb", "--num-gpus", "8", "--tp", "8",
            "--sequence-parallel", "--zero", "1", "--seq-len", "8192", "--micro-batch", "1", "--recompute", "full", "--format", "json"]


def _estimate_args(*options: str) -> list[str]:
    """ESTIMATE with options in place of its own values of the same options (an option is given once)."""
    given = {option for option in options if option.startswith("--")}
    args, skip = [], False
    for arg in ESTIMATE:
        if skip:
            skip = False
            if not arg.startswith("--"):  # the value of an option left out
                continue
        if arg in given:
            skip = True
            continue
        args.append(arg)
    return args + list(options)


def _estimate(stack: str, *options: str) -> dict:
    result = invoke(*_estimate_args("--stack", stack, *options))
    assert result.exit_code in (0, 3), (result.exit_code, result.stderr)
    return json.loads(result.stdout)


def test_the_cli_option_round_trips_and_speeds_up_the_estimate() -> None:
    default, off, on = (_estimate("megatron", *o) for o in ((), ("--no-tp-overlap",), ("--tp-overlap",)))
    assert default["job"]["tp_overlap"] is off["job"]["tp_overlap"] is False  # Megatron-LM's default
    assert on["job"]["tp_overlap"] is True
    assert default["performance"]["tokens_per_s"] == off["performance"]["tokens_per_s"]
    assert on["performance"]["tokens_per_s"] > off["performance"]["tokens_per_s"]
    assert on["memory"]["total_bytes"] == off["memory"]["total_bytes"]  # a time option
    # torchtitan runs TP beside FSDP over more than one rank (SHARDED_MODEL_PARALLEL_STACKS): 16 GPUs, DP 2
    titan = _estimate("torchtitan", "--compile", "--tp-overlap", "--zero", "3", "--num-gpus", "16")
    assert titan["job"]["tp_overlap"] is True and titan["job"]["compile"] == "model+loss"
    without_sp = invoke(*[a for a in ESTIMATE if a != "--sequence-parallel"], "--stack", "megatron", "--tp-overlap")
    assert without_sp.exit_code == 2
    assert_error_line(without_sp, "tp-overlap", "--sequence-parallel")


def test_stacks_without_it_refuse_the_option_in_one_line() -> None:
    result = invoke(*ESTIMATE, "--stack", "hf", "--tp-overlap")
    assert result.exit_code == 2
    assert_error_line(result, "stack='hf'", "TP communication overlap", "tp_overlap=True")
    result = invoke(*_estimate_args("--stack", "torchtitan", "--zero", "3", "--num-gpus", "16", "--tp-overlap",
                                    "--no-compile"))
    assert result.exit_code == 2
    assert_error_line(result, "stack='torchtitan'", "async TP without torch.compile")


@pytest.mark.parametrize(("cell", "value"), [("", False), ("true", True), ("FALSE", False), (True, True)])
def test_the_batch_column_is_the_jobs_switch(cell, value) -> None:
    assert "tp_overlap" in INPUT_COLUMNS
    query = parse_row({"model": "llama-3.1-70b", "seq_len": "8192", "stack": "megatron", "tp_overlap": cell})
    assert query.job.tp_overlap is value


def test_the_launch_configs_carry_the_published_keys() -> None:
    plan = Plan(**TP8)
    megatron = launch_config(_job("megatron", True), plan, LaunchModel(80)).text
    assert "  --sequence-parallel\n  --tp-comm-overlap\n" in megatron  # ModelParallelConfig.tp_comm_overlap
    # without sequence parallelism (or TP) Megatron-LM asserts on the flag: the plan runs without it
    assert "--tp-comm-overlap" not in launch_config(_job("megatron", True), Plan(**{**TP8, "sequence_parallel": False}),
                                                   LaunchModel(80)).text
    assert "--tp-comm-overlap" not in launch_config(_job("megatron", False), plan, LaunchModel(80)).text
    sharded = Plan(**{**TP8, "num_gpus": 16, "zero": 3})  # torchtitan's TP beside FSDP over DP 2
    titan = tomllib.loads(launch_config(_job("torchtitan", True, compile="model+loss"), sharded, LaunchModel(80)).text)
    assert titan["parallelism"]["enable_async_tensor_parallel"] is True  # v0.2.2 Parallelism field
    assert titan["compile"] == {"enable": True, "components": ["model", "loss"]}
    off = tomllib.loads(launch_config(_job("torchtitan", False, compile="model+loss"), sharded, LaunchModel(80)).text)
    assert "enable_async_tensor_parallel" not in off["parallelism"]
    with pytest.raises(VramplanError, match="tp_overlap"):
        launch_config(_job("torchtitan", True), sharded, LaunchModel(80))
