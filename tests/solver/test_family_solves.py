"""The search over the families whose layers only some stacks build, one case each: CP-SAT's optimum equals the
brute-force enumerator's, every returned plan is one those layers run, and `--stack any` leaves out the stacks
that do not model them.
- A Gated DeltaNet hybrid (Qwen3.5 as a qwen3_5 file wraps it): no TP, no CP; hf / deepspeed / custom.
- DeepSeek Sparse Attention (DeepSeek-V3.2's layer): no CP (the indexer scores the whole sequence); megatron's
  own DSA is another layer, torchtitan builds no deepseek_v32.
- Sliding layers with their own KV heads and sinks (MiMo-V2-Flash's layer): TP up to the full layers' 4 KV heads
  and beyond, replicated; no CP (the ring is sized by one KV head count); megatron builds one attention shape.
- Gemma 4's layers (26B-A4B; E2B): full and sliding layers of different head widths and KV heads, routed experts
  beside each MLP; per-layer input embeddings and KV-shared layers; the same limits as MiMo-V2-Flash's."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from helpers.queries import any_stack_plans, both_engines_best, write_config

from vramplan.models.core.setup import Job, Plan


@dataclass(frozen=True)
class FamilyCase:
    config: dict
    jobs: tuple[tuple[Job, str], ...]  # (job, objective) pairs the two engines must agree on
    no_tp: bool  # the layers run without tensor parallelism
    stacks: frozenset[str] | None = None  # the only stacks `--stack any` may pick, or None
    not_stacks: frozenset[str] = frozenset()  # stacks it must leave out
    max_gpus: int = 16  # the queries' GPU limit (the brute-force enumeration grows with it)

    def runs(self, plan: Plan) -> bool:
        return plan.cp == 1 and (plan.tp == 1 or not self.no_tp)


CASES = {
    # a Qwen3.5 27B-like decoder (64 layers, 5,120 wide) as a qwen3_5 file wraps it
    "gated_delta": FamilyCase(
        {"model_type": "qwen3_5", "text_config": {
            "model_type": "qwen3_5_text", "hidden_size": 5120, "intermediate_size": 17408, "num_hidden_layers": 64,
            "num_attention_heads": 24, "num_key_value_heads": 4, "linear_num_value_heads": 48, "linear_num_key_heads": 16}},
        ((Job(seq_len=2048, method="qlora"), "time"), (Job(seq_len=8192, method="full", stack="deepspeed"), "cost")),
        no_tp=True, stacks=frozenset({"hf", "deepspeed"})),
    # a DeepSeek-V2-Lite-sized decoder with DeepSeek-V3.2's indexer (27 layers, 2,048 wide, 64 experts)
    "sparse_attention": FamilyCase(
        {"model_type": "deepseek_v32", "num_hidden_layers": 27, "hidden_size": 2048, "intermediate_size": 10944,
         "moe_intermediate_size": 1408, "num_attention_heads": 16, "num_key_value_heads": 16, "n_routed_experts": 64,
         "num_experts_per_tok": 6, "n_shared_experts": 2, "first_k_dense_replace": 1, "q_lora_rank": 512,
         "vocab_size": 102400, "index_n_heads": 32},
        ((Job(seq_len=4096, method="lora"), "time"), (Job(seq_len=4096, method="full", stack="deepspeed"), "cost")),
        no_tp=False, not_stacks=frozenset({"megatron", "torchtitan", "torchtitan-root-fsdp"})),
    # MiMo-V2-Flash's layer at a twelfth of its width: 24 layers (full on 0, 5, 11, 17, 23), 32 experts
    "local_attention_shape": FamilyCase(
        {"model_type": "mimo_v2_flash", "num_hidden_layers": 24, "hidden_size": 1024, "intermediate_size": 4096,
         "moe_intermediate_size": 512, "num_attention_heads": 16, "num_key_value_heads": 4, "n_routed_experts": 32,
         "num_experts_per_tok": 4, "vocab_size": 32000},
        ((Job(seq_len=4096, method="lora"), "time"), (Job(seq_len=4096, method="full", stack="custom"), "cost")),
        # up to 8 GPUs: the custom stack's full job on 16 enumerated for 40 s of the suite's 13 minutes
        no_tp=False, not_stacks=frozenset({"megatron"}), max_gpus=8),
    # Gemma 4 26B-A4B's layer at an eighth of its depth and a quarter of its experts: 512-wide full layers with 2 KV
    # heads whose values are their keys, 256-wide sliding ones with 8, 32 experts beside each MLP
    "gemma4_moe": FamilyCase(
        {"model_type": "gemma4_text", "hidden_size": 2816, "intermediate_size": 2112, "num_hidden_layers": 6,
         "num_attention_heads": 16, "num_key_value_heads": 8, "num_global_key_value_heads": 2, "head_dim": 256,
         "global_head_dim": 512, "attention_k_eq_v": True, "sliding_window": 1024, "hidden_size_per_layer_input": 0,
         "enable_moe_block": True, "num_experts": 32, "top_k_experts": 8, "moe_intermediate_size": 704},
        ((Job(seq_len=4096, method="lora"), "time"), (Job(seq_len=4096, method="full"), "cost")),
        no_tp=False, not_stacks=frozenset({"megatron"})),
    # Gemma 4 E2B's layer: per-layer input embeddings, one KV head, the last 4 of 12 layers reusing keys and values
    "gemma4_ple": FamilyCase(
        {"model_type": "gemma4_text", "hidden_size": 1536, "intermediate_size": 6144, "num_hidden_layers": 12,
         "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256, "global_head_dim": 512,
         "sliding_window": 512, "hidden_size_per_layer_input": 256, "num_kv_shared_layers": 4,
         "use_double_wide_mlp": True},
        ((Job(seq_len=2048, method="qlora"), "time"), (Job(seq_len=4096, method="full", stack="deepspeed"), "cost")),
        no_tp=False, not_stacks=frozenset({"megatron"})),
}


@pytest.mark.parametrize(("name", "index"), [(name, i) for name, case in CASES.items() for i in range(len(case.jobs))])
def test_cpsat_equals_brute_force(name: str, index: int, tmp_path) -> None:
    case = CASES[name]
    job, objective = case.jobs[index]
    assert case.runs(both_engines_best(write_config(tmp_path, case.config), job, objective, max_gpus=case.max_gpus))


@pytest.mark.parametrize("name", sorted(CASES))
def test_any_stack_picks_one_that_models_the_layers(name: str, tmp_path) -> None:
    case = CASES[name]
    plans = any_stack_plans(write_config(tmp_path, case.config))
    stacks = {plan.stack for plan in plans}
    assert case.stacks is None or stacks <= case.stacks
    assert not stacks & case.not_stacks
    assert all(case.runs(plan) for plan in plans)
