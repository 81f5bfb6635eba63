"""The search over a Gated DeltaNet hybrid (Qwen3-Next / Qwen3.5): CP-SAT's optimum equals the brute-force
enumerator's, every returned plan is one the stack runs (no TP, no CP, hf / deepspeed / custom), and
`--stack any` leaves out the stacks that do not model its layers."""

from __future__ import annotations

import pytest
from helpers.queries import any_stack_plans, both_engines_best, write_config

from vramplan.models.core.setup import Job

# a Qwen3.5 27B-like decoder (64 layers, 5,120 wide) as a qwen3_5 file wraps it
QWEN3_5 = {"model_type": "qwen3_5", "text_config": {
    "model_type": "qwen3_5_text", "hidden_size": 5120, "intermediate_size": 17408, "num_hidden_layers": 64,
    "num_attention_heads": 24, "num_key_value_heads": 4, "linear_num_value_heads": 48, "linear_num_key_heads": 16}}


@pytest.fixture
def config_path(tmp_path):
    return write_config(tmp_path, QWEN3_5)


@pytest.mark.parametrize(("job", "objective"), [(Job(seq_len=2048, method="qlora"), "time"),
                                                (Job(seq_len=8192, method="full", stack="deepspeed"), "cost")])
def test_cpsat_equals_brute_force(config_path: str, job: Job, objective: str) -> None:
    plan = both_engines_best(config_path, job, objective)
    assert plan.tp == plan.cp == 1


def test_any_stack_picks_one_that_models_the_layers(config_path: str) -> None:
    plans = any_stack_plans(config_path)
    assert {plan.stack for plan in plans} <= {"hf", "deepspeed"}
    assert all(plan.tp == plan.cp == 1 for plan in plans)
