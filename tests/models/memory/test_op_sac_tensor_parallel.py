"""torchtitan's per-op SAC under tensor parallelism (issue 32: with TP 8 + SP it was predicted to
save nothing while still costing its recompute: every saved tensor was counted at full width).

What the policy saves on one rank (torchtitan/distributed/activation_checkpoint.py
`_get_default_save_ops` at b5bcd76, the mm counter saving the 1st, 3rd, ... mm of a block): the
block input (/ tp under SP), the outputs of wq, wv, w1 and w2 as the rank computes them (wq, wv,
w1 column-parallel: out / tp; w2 row-parallel: the full-width partial sum before its
reduce-scatter), the SDPA output and logsumexp of the rank's heads, and under SP both
reduce-scatter outputs (`_c10d_functional.reduce_scatter_tensor` is in the save list)."""

from __future__ import annotations

from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.activations import microbatch_activations

MIB = 2**20


def _per_layer(catalogue, tp: int, sp: bool, recompute: str) -> int:
    arch = catalogue.architecture("llama-3.1-70b")
    plan = Plan(gpu="h100-sxm-80gb", num_gpus=8, tp=tp, sequence_parallel=sp, recompute=recompute)
    return microbatch_activations(arch, Job(seq_len=8192, stack="torchtitan"), plan).per_layer_bytes


def test_op_sac_under_tp8_sp_keeps_the_ranks_shards(catalogue):
    t, h, e = 8192, 8192, 2  # tokens of one micro-batch, hidden width, bf16
    expected = (e * t * h // 8  # block input, sequence-sharded
                + e * t * 8192 // 8 + e * t * 1024 // 8 + e * t * 28672 // 8  # wq, wv, w1 (column-parallel)
                + e * t * h  # w2's full-width partial sum
                + e * t * 8192 // 8 + 4 * t * 64 // 8  # SDPA output and fp32 logsumexp of 8 heads
                + 2 * e * t * h // 8)  # the two reduce-scatter outputs
    assert _per_layer(catalogue, 8, True, "op") == expected  # 266.25 MiB
    assert _per_layer(catalogue, 8, True, "op") < 0.7 * _per_layer(catalogue, 8, True, "none")  # 388.3 MiB


def test_op_sac_without_tp_is_unchanged(catalogue):
    assert _per_layer(catalogue, 1, False, "op") == 978 * MIB
