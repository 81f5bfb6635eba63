"""Golden vectors of Megatron-LM `megatron/training/theoretical_memory_usage.py` under TP/PP/VPP.

Source: NVIDIA/Megatron-LM megatron/training/theoretical_memory_usage.py (read at 00caa53a and
38644dd7). Its accounting, in MB = 2^20 bytes:
- weights + optimizer: parameters of the most loaded shard x 18 bytes (bf16 weight, fp32 main
  grad, fp32 main param, Adam m, v), or x (6 + 12/d) with the distributed optimizer. The shard is
  (transformer block / p + embedding) / t, + the untied output layer / t when p = 1.
- activations with SP + selective recompute (its Table-2 path): per layer s b h (18 + 4 ffn/h),
  x L (stage 0 keeps p micro-batches of L/p layers), + 8 s b p (token ids) + s b h p (embedding
  dropout mask), x (1 + (p-1)/(p vp)) when interleaved else x min(1, m/p) when p > 1 (the
  embedding's share of that penalty is below what the schedule keeps: 2p micro-batches, tested below),
  + s b h 4 (1 + V/h) when p = 1, all / t.
The vectors below were computed from those formulas (the project's reference notes, sec. 9):

| case | params on most-loaded shard | weights + optimizer MiB | activations MiB |
| GPT-3 175B t8 p8, SP + selective, 18 B/param | 2.7971 B | 48016.18 | 9816.02 |
| same, distributed optimizer d 8 | 2.7971 B | 20006.74 | 9816.02 |
| same, distributed optimizer d 8, vp 3 | 2.7971 B | 20006.74 | 12679.02 |
| Llama-3.1-8B-like s 8192 t1 p1, dist. opt. d 8, SP + selective | 8.0303 B | 57436.90 | 36936.06 |
| same, t2 d4, no dist. opt., no SP | 4.0153 B | 68926.57 | (1.05 x GPT constants) |

The reference's shard replicates the norms (they are not TP-split): (block without norms / p +
embedding) / t + norms / p, which is what Megatron builds. Our model places the whole final norm
on the last rank instead of 1/p of it everywhere, and counts a few small tensors Megatron's
formula leaves out (fp32 norm statistics, replicated token and position ids); each test states
the exact difference it allows, term by term.
"""

from __future__ import annotations

import pytest
from helpers.catalogue import packaged_catalogue

from vramplan.models.architecture.params import count_params
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.activations import activations
from vramplan.models.memory.model_states import model_states
from vramplan.models.memory.parallel_states import rank_params

MIB = 2**20
H, L, V, S, T, P = 12288, 96, 51200, 2048, 8, 8

# Megatron counts GPT-3 without biases or position embeddings: 12 h^2 + 4 h per layer (2 LayerNorms
# of weight and bias), V h embedding (tied), 2 h final norm. A llama-layout row with a 3-matrix
# MLP of width 8h/3 has exactly these counts, so it stands in for Megatron's GPT in the weight tests.
GPT3_MEGATRON_COUNTS = packaged_catalogue().architecture("llama-2-7b").model_copy(update={
    "name": "gpt3-175b-megatron-counts", "num_layers": L, "hidden_size": H, "num_attention_heads": 96,
    "num_kv_heads": 96, "head_dim": 128, "intermediate_size": 8 * H // 3, "vocab_size": V,
    "tie_word_embeddings": True, "norm_kind": "layernorm", "mlp_kind": "swiglu",
})
# Activations follow the real GPT layer (4h GELU MLP, dropout 0.1, learned positions).
GPT3 = packaged_catalogue().architecture("gpt3-175b").model_copy(update={"vocab_size": V})
MEGATRON_JOB = Job(seq_len=S, stack="megatron", kernels="fused", attention="eager", accounting="hf")


def gpt3_plan(**update: object) -> Plan:
    fields = dict(gpu="a100-sxm-80gb", num_gpus=T * P * 8, tp=T, pp=P, sequence_parallel=True,
                  recompute="selective", grad_accum=64)
    return Plan(**(fields | update))


def states_mib(arch, job, plan, stage) -> float:
    states = model_states(arch, job, plan, stage)
    return (states.weights_bytes + states.gradients_bytes + states.optimizer_states_bytes) / MIB


def test_gpt3_counts_stand_in_is_megatrons_parameter_count() -> None:
    assert count_params(GPT3_MEGATRON_COUNTS).total == L * (12 * H * H + 4 * H) + 2 * H + V * H


@pytest.mark.parametrize(("zero", "expected_mib"), [(0, 48016.18), (1, 20006.74)])
def test_gpt3_175b_weights_and_optimizer(zero: int, expected_mib: float) -> None:
    plan = gpt3_plan(zero=zero)
    first = rank_params(GPT3_MEGATRON_COUNTS, T, P, 1, 0)
    last = rank_params(GPT3_MEGATRON_COUNTS, T, P, 1, P - 1)
    megatron_shard = (L * 12 * H * H // P + V * H) // T + (L * 4 * H + 2 * H) // P  # 2,797,145,088
    # Rank 0 holds no final norm (Megatron spreads 2h/p of it); the last rank holds all of it
    # beside its copy of the tied embedding.
    assert first.total == megatron_shard - 2 * H // P
    assert last.total == megatron_shard - 2 * H // P + 2 * H
    bytes_per_param = 18 if zero == 0 else 6 + 12 / 8
    assert states_mib(GPT3_MEGATRON_COUNTS, MEGATRON_JOB, plan, 0) == pytest.approx(
        expected_mib - 2 * H // P * bytes_per_param / MIB, abs=0.005)
    assert states_mib(GPT3_MEGATRON_COUNTS, MEGATRON_JOB, plan, P - 1) == pytest.approx(
        expected_mib + (2 * H - 2 * H // P) * bytes_per_param / MIB, abs=0.005)


def _stage0_kept_mib(plan: Plan) -> float:
    acts = activations(GPT3, MEGATRON_JOB, plan, 0)
    return (acts.layers_bytes + acts.embedding_bytes + acts.output_layer_bytes) / MIB


def _not_in_megatrons_formula_bytes(in_flight: float, embedding_in_flight: float) -> float:
    """What rank 0 (12 layers) keeps beyond the formula: per micro-batch in flight, the fp32
    LayerNorm mean + rstd of 2 norms per layer, split by SP; per micro-batch on the first stage, the
    int64 token ids Megatron divides by t but every TP rank holds, and the int64 learned-position
    ids."""
    norm_stats = 12 * 2 * 2 * 4 * S // T
    token_ids = 8 * S - 8 * S // T
    position_ids = 8 * S
    return in_flight * norm_stats + embedding_in_flight * (token_ids + position_ids)


def _schedules_embedding_bytes(embedding_in_flight: float, formulas: float) -> float:
    """The formula's embedding terms (8 s b p token ids + s b h p dropout mask, / t) for the
    micro-batches the schedule keeps on the first stage beyond the `formulas` its penalty counts."""
    return (embedding_in_flight - formulas) * (8 * S + S * H) / T


@pytest.mark.parametrize(("update", "expected_mib", "in_flight", "embedding_in_flight"), [
    ({"zero": 0}, 9816.02, 8, 8),  # 1F1B: rank 0 holds p = 8 micro-batches of its 12 layers
    ({"zero": 1}, 9816.02, 8, 8),
    # 2(p-1) + (vp-1)p + 1 = 31 chunks of 4 layers; the formula scales the embedding by the same
    # 31 / 3, where Megatron's order keeps 2p = 16 on chunk 0 (tests/models/memory/test_pipeline_buffers.py
    # test_megatrons_interleaved_order_gives_the_counts): 17.0 MiB more
    ({"zero": 1, "vpp": 3}, 12679.02, 31 / 3, 16),
])
def test_gpt3_175b_activations_sp_selective(update: dict, expected_mib: float, in_flight: float,
                                           embedding_in_flight: float) -> None:
    got = _stage0_kept_mib(gpt3_plan(**update))
    beyond = _not_in_megatrons_formula_bytes(in_flight, embedding_in_flight)
    beyond += _schedules_embedding_bytes(embedding_in_flight, in_flight)
    assert got == pytest.approx(expected_mib + beyond / MIB, abs=0.01)


def test_interleaved_factor_is_korthikantis() -> None:
    plain = activations(GPT3, MEGATRON_JOB, gpt3_plan(), 0).layers_bytes
    interleaved = activations(GPT3, MEGATRON_JOB, gpt3_plan(vpp=3), 0).layers_bytes
    assert interleaved / plain == pytest.approx(1 + (P - 1) / (P * 3))  # 1.2917


def test_fewer_micro_batches_than_stages_discount_like_megatron() -> None:
    full = activations(GPT3, MEGATRON_JOB, gpt3_plan(grad_accum=8), 0).layers_bytes
    half = activations(GPT3, MEGATRON_JOB, gpt3_plan(grad_accum=4), 0).layers_bytes
    assert half * 2 == full  # min(1, m / p)


LLAMA = packaged_catalogue().architecture("llama-3.1-8b")
LLAMA_JOB = Job(seq_len=8192, stack="megatron", kernels="fused", attention="flash", accounting="hf")


def test_llama_8b_distributed_optimizer_d8() -> None:
    plan = Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=1, sequence_parallel=True, recompute="selective")
    assert rank_params(LLAMA, 1, 1, 1, 0).total == 8_030_261_248
    assert states_mib(LLAMA, LLAMA_JOB, plan, 0) == pytest.approx(57436.90, abs=0.005)


def test_llama_8b_tp2_no_distributed_optimizer() -> None:
    plan = Plan(gpu="h100-sxm-80gb", num_gpus=8, tp=2, zero=0)
    assert round(rank_params(LLAMA, 2, 1, 1, 0).total / 1e9, 4) == 4.0153
    assert states_mib(LLAMA, LLAMA_JOB, plan, 0) == pytest.approx(68926.57, abs=0.005)


def test_llama_8b_activations_differ_from_megatron_by_the_gpt_constants_only() -> None:
    """Megatron's 18 + 4 ffn/h assumes GPT's full-head K/V and two dropout masks and a 2-matrix
    MLP; the Llama layer saves 13 + 6 ffn/h (GQA K/V = 1 sbh, SwiGLU gate/up/down = 6 ffn/h, no
    dropout) + fp32 RMSNorm rstd, and keeps RoPE's cos/sin. The output layer: Megatron 4 sbh
    (1 + V/h); ours the final norm input and rstd, lm_head input, fp32 log-probs, int64 targets (s + 1 at b = 1), the loss weight."""
    plan = Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=1, sequence_parallel=True, recompute="selective")
    acts = activations(LLAMA, LLAMA_JOB, plan, 0)
    s, h, f, v, layers = 8192, 4096, 14336, 128256, 32
    megatron = layers * s * (18 * h + 4 * f) + 8 * s + s * h + 4 * s * (h + v)
    assert megatron / MIB == pytest.approx(36936.06, abs=0.01)
    layer_difference = s * (2 * f - 5 * h) + 2 * 4 * s
    output_difference = 2 * s * h + 4 * s + 2 * s * h + 4 * s * v + 8 * (s + 1) + 4 - 4 * s * (h + v)
    embedding_difference = -s * h  # no embedding dropout in Llama
    rope = 2 * 2 * s * 128  # bf16 cos and sin tables (s x head_dim), shared by the layers
    kept = acts.layers_bytes + acts.embedding_bytes + acts.output_layer_bytes
    assert kept == megatron + layers * layer_difference + output_difference + embedding_difference + rope
