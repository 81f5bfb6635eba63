"""The search over a DeepSeek Sparse Attention model (DeepSeek-V3.2's layer): CP-SAT's optimum equals the
brute-force enumerator's, no plan splits the sequence (cp = 1), and `--stack any` leaves out the stacks that
do not model its indexer (megatron's own DSA is another layer; torchtitan builds no deepseek_v32)."""

from __future__ import annotations

import pytest
from helpers.queries import any_stack_plans, both_engines_best, write_config

from vramplan.models.core.setup import Job

# a DeepSeek-V2-Lite-sized decoder with DeepSeek-V3.2's indexer (27 layers, 2,048 wide, 64 experts)
SMALL_V32 = {"model_type": "deepseek_v32", "num_hidden_layers": 27, "hidden_size": 2048, "intermediate_size": 10944,
             "moe_intermediate_size": 1408, "num_attention_heads": 16, "num_key_value_heads": 16, "n_routed_experts": 64,
             "num_experts_per_tok": 6, "n_shared_experts": 2, "first_k_dense_replace": 1, "q_lora_rank": 512,
             "vocab_size": 102400, "index_n_heads": 32}


@pytest.fixture
def config_path(tmp_path):
    return write_config(tmp_path, SMALL_V32)


@pytest.mark.parametrize(("job", "objective"), [(Job(seq_len=4096, method="lora"), "time"),
                                                (Job(seq_len=4096, method="full", stack="deepspeed"), "cost")])
def test_cpsat_equals_brute_force(config_path: str, job: Job, objective: str) -> None:
    plan = both_engines_best(config_path, job, objective)
    assert plan.cp == 1


def test_any_stack_picks_one_that_models_the_indexer(config_path: str) -> None:
    plans = any_stack_plans(config_path)
    assert not {plan.stack for plan in plans} & {"megatron", "torchtitan", "torchtitan-root-fsdp"}
    assert all(plan.cp == 1 for plan in plans)
