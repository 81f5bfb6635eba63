"""Issue 32's FSDP regimes, byte counts from the code:
- FSDP's root unit is not resharded after its forward (torch FSDP1 _runtime_utils.py
  `_post_forward_reshard`, FSDP2 `FSDPState._lazy_init`: "For the root, do not reshard after
  forward"); under accelerate's transformer-based wrap (`--stack hf`) it holds the embedding, the
  final norm and the lm_head, gathered beside the layer in flight (models/memory/fsdp.py);
- torchtitan's DTensor sequence parallelism saves the all-gathered input of a column-parallel
  linear (torchtitan@9dec370 parallelize_llama.py apply_tp: ColwiseParallel(input_layouts=Shard(1))),
  T x h whole where Megatron keeps its T / tp shard (models/memory/parallel_activations.py);
- torch's loss_parallel backward (torch/distributed/tensor/parallel/loss.py
  `_nll_loss_and_log_softmax_backward`: `(zeros_like(x) + exp(x)) * grad_output`) holds three fp32
  T x v / tp buffers beside the log-probabilities (models/memory/loss.py)."""

from __future__ import annotations

from vramplan.models.architecture.params import count_params
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.activations import microbatch_activations
from vramplan.models.memory.fsdp import units, working_set_bytes
from vramplan.models.memory.overhead import overhead


def test_the_fsdp_root_unit_stays_gathered_under_hf(catalogue) -> None:
    arch = catalogue.architecture("llama-2-70b")
    counts = count_params(arch)
    root = counts.embedding + counts.final_norm + counts.lm_head
    assert root == 2 * 32000 * 8192 + 8192
    assert units(arch, Job(stack="hf", method="qlora"), Plan(gpu="x"))[0].gathered_bytes == 2 * root
    assert units(arch, Job(stack="torchtitan"), Plan(gpu="x"))[0] is None  # v0.2.2 wraps them apart
    plan = Plan(gpu="a100-sxm-80gb", num_gpus=2, zero=3)
    hf = overhead(arch, Job(method="qlora", stack="hf"), plan).zero3_live_params_bytes
    layers = working_set_bytes(arch, Job(method="qlora", stack="hf"), plan) - 2 * root
    assert hf - layers == 2 * root  # 1.05 GB, in the 16-bit compute dtype
    one_gpu = Plan(gpu="a100-sxm-80gb", num_gpus=1, zero=3)
    assert overhead(arch, Job(method="qlora", stack="hf"), one_gpu).zero3_live_params_bytes == 0


def _plan(tp: int) -> Plan:
    return Plan(gpu="h100-sxm-80gb", num_gpus=8 * tp, zero=3, tp=tp, sequence_parallel=True, micro_batch=2,
                recompute="full")


def test_dtensor_sequence_parallelism_saves_the_gathered_output_layer_input(catalogue) -> None:
    arch = catalogue.architecture("llama-3.1-8b")
    t, h = 2 * 8192, arch.hidden_size
    titan = microbatch_activations(arch, Job(stack="torchtitan", seq_len=8192), _plan(8))
    megatron = microbatch_activations(arch, Job(stack="megatron", seq_len=8192), _plan(8))
    titan_1 = microbatch_activations(arch, Job(stack="torchtitan", seq_len=8192), _plan(1))
    # the lm_head's input: 2 T h whole instead of 2 T h / 8 (the losses' other terms are alike)
    assert titan.output_layer_bytes - megatron.output_layer_bytes == 2 * t * h - 2 * t * h // 8
    assert titan_1.output_layer_bytes == microbatch_activations(
        arch, Job(stack="megatron", seq_len=8192), _plan(1)).output_layer_bytes


def test_loss_parallel_backward_holds_three_fp32_buffers(catalogue) -> None:
    arch = catalogue.architecture("llama-3.1-8b")
    t, v = 2 * 8192, arch.vocab_size
    titan = microbatch_activations(arch, Job(stack="torchtitan", seq_len=8192), _plan(8))
    hf = microbatch_activations(arch, Job(stack="hf", seq_len=8192), _plan(8))
    # 3 x 4 T v / 8, less the 16-bit logits the eager loss keeps and torchtitan deletes (`del pred`)
    # without pipelining; a pipeline stage keeps its output for its backward
    assert titan.single_stage_loss_peak_bytes == (3 * 4 - 2) * t * v // 8
    assert titan.loss_peak_bytes == 3 * 4 * t * v // 8
    assert hf.loss_peak_bytes == 2 * 4 * t * v // 8  # aten's fused log_softmax backward: two fp32 buffers
    assert microbatch_activations(arch, Job(stack="torchtitan", seq_len=8192), _plan(1)).loss_peak_bytes == 8 * t * v
