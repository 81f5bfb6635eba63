"""The search over a model whose sliding layers have their own KV heads and sinks (MiMo-V2-Flash's layer, a smaller
shape): CP-SAT's optimum equals the brute-force enumerator's over the same space (TP up to the full layers' 4 KV
heads and beyond, replicated), no plan splits the sequence (cp = 1: the ring is sized by one KV head count), and
`--stack any` leaves out megatron, whose layers share one attention shape."""

from __future__ import annotations

import pytest
from helpers.queries import any_stack_plans, both_engines_best, write_config

from vramplan.models.core.setup import Job

# MiMo-V2-Flash's layer at a twelfth of its width: 24 layers (full on 0, 5, 11, 17, 23), 32 experts
SMALL_MIMO = {"model_type": "mimo_v2_flash", "num_hidden_layers": 24, "hidden_size": 1024, "intermediate_size": 4096,
              "moe_intermediate_size": 512, "num_attention_heads": 16, "num_key_value_heads": 4, "n_routed_experts": 32,
              "num_experts_per_tok": 4, "vocab_size": 32000}


@pytest.fixture
def config_path(tmp_path):
    return write_config(tmp_path, SMALL_MIMO)


@pytest.mark.parametrize(("job", "objective"), [(Job(seq_len=4096, method="lora"), "time"),
                                                (Job(seq_len=4096, method="full", stack="custom"), "cost")])
def test_cpsat_equals_brute_force(config_path: str, job: Job, objective: str) -> None:
    plan = both_engines_best(config_path, job, objective)
    assert plan.cp == 1


def test_any_stack_leaves_out_megatron(config_path: str) -> None:
    assert all(plan.stack != "megatron" and plan.cp == 1 for plan in any_stack_plans(config_path))
