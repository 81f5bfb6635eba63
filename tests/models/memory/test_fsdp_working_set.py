"""ZeRO-3's working set under torch FSDP (models/memory/fsdp.py), hand-counted from the units the
code gathers while a unit runs its backward:
- FSDP2 (torch _fully_shard/_fsdp_param_group.py pre_backward -> _backward_prefetch, post_backward;
  _fsdp_collectives.py foreach_reduce): the unit, its gradient (param_dtype), the next unit
  prefetched, the previous unit's reduce-scatter input (reduce dtype: fp32 in torchtitan);
- FSDP1 (BACKWARD_PRE): the same without the reduce-scatter input;
- the root unit that holds the embedding and lm_head (torchtune's LoRA recipe, hf, litgpt,
  torchtitan before 83e6941: torchtitan-root-fsdp) is gathered through the whole backward;
  torchtitan v0.2.2 wraps tok_embeddings and [norm, output] apart, so no root is;
- under torchtitan's pipeline parallelism the stage is gathered already (model_states): one unit's
  16-bit gradient before it is accumulated in fp32."""

from __future__ import annotations

from vramplan.models.architecture.lora import trainable_params
from vramplan.models.architecture.params import count_params
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.fsdp import fsdp_version, units, working_set_bytes
from vramplan.models.memory.overhead import overhead


def _plan(**kw) -> Plan:
    return Plan(gpu="h100-sxm-80gb", **{"num_gpus": 8, "zero": 3, **kw})


def test_each_stack_names_its_fsdp() -> None:
    assert fsdp_version(Job(stack="torchtitan")) == fsdp_version(Job(stack="torchtune")) == 2
    assert fsdp_version(Job(stack="litgpt", method="lora")) == 2
    assert fsdp_version(Job(stack="litgpt", method="full")) == 1  # finetune/full.py FSDPStrategy
    assert fsdp_version(Job(stack="hf")) == fsdp_version(Job(stack="litgpt-fsdp1")) == 1
    assert fsdp_version(Job(stack="deepspeed")) is None and fsdp_version(Job(stack="megatron")) is None


def test_torchtitan_full_finetune_holds_the_last_layer_and_the_output_units_fp32_reduce_input(catalogue) -> None:
    arch = catalogue.architecture("llama-3.1-8b")
    c = count_params(arch)
    layer, output, embedding = c.per_layer, c.lm_head + c.final_norm, c.embedding
    job = Job(stack="torchtitan", method="full")
    root, backward = units(arch, job, _plan())
    assert root is None  # v0.2.2: tok_embeddings and [norm, output] are units of their own
    assert backward[0].gathered_bytes == 2 * output and backward[-1].gathered_bytes == 2 * embedding
    # The moments, in backward order: [norm, output]; the last layer; a middle layer; layer 0; the embedding.
    moments = [2 * output + 2 * output + 2 * layer,
               2 * layer + 2 * layer + 2 * layer + 4 * output,  # the output unit's fp32 reduce-scatter input
               2 * layer + 2 * layer + 2 * layer + 4 * layer,
               2 * layer + 2 * layer + 2 * embedding + 4 * layer,
               2 * embedding + 2 * embedding + 4 * layer]
    assert working_set_bytes(arch, job, _plan()) == max(moments) == moments[1]
    over = overhead(arch, job, _plan())
    assert over.zero3_live_params_bytes == moments[1] and over.comm_buckets_bytes == 0


def test_torchtitan_before_1094_keeps_its_root_gathered_through_the_backward(catalogue) -> None:
    # pytorch/torchtitan@9dec370 parallelize_llama.py apply_fsdp: the blocks, then fully_shard(model)
    # over tok_embeddings, norm and output: the root, gathered from the lm_head's backward to the end
    arch = catalogue.architecture("llama-3.1-8b")
    c = count_params(arch)
    layer, root = c.per_layer, c.embedding + c.final_norm + c.lm_head
    job = Job(stack="torchtitan-root-fsdp", method="full")
    assert fsdp_version(job) == 2
    held, backward = units(arch, job, _plan())
    assert held is not None and held.gathered_bytes == 2 * root and held.grad_bytes == 2 * c.lm_head
    assert [u.gathered_bytes for u in backward] == [2 * layer] * 3  # no unit of the ends' own
    # a middle layer, its bf16 gradient, the next layer prefetched and the previous layer's fp32
    # reduce-scatter input, beside the root and the lm_head's bf16 gradient (its post-backward is
    # the root's, in the final callback)
    moment = 2 * layer + 2 * layer + 2 * layer + 4 * layer + 2 * root + 2 * c.lm_head
    assert working_set_bytes(arch, job, _plan()) == moment
    today = working_set_bytes(arch, Job(stack="torchtitan", method="full"), _plan())
    # today's peak moment: the last layer with the [norm, output] unit's fp32 reduce-scatter input
    assert today == 6 * layer + 4 * (c.lm_head + c.final_norm)
    assert round((moment - today) / 2**30, 2) == 1.79  # what the 2024-12 8B rows gain over today's wrapping
    # under PP the stage stays gathered (model_states): the largest 16-bit gradient, the lm_head's
    # in the last stage's root
    assert working_set_bytes(arch, job, _plan(num_gpus=16, pp=2), stage_gathered=True) == 2 * max(layer, c.lm_head)


def test_torchtune_lora_keeps_its_root_gathered_beside_two_layers(catalogue) -> None:
    arch = catalogue.architecture("llama-3.1-70b")
    c = count_params(arch)
    job = Job(stack="torchtune", method="lora", lora_rank=16, lora_targets=("q_proj", "k_proj", "v_proj"))
    root = (c.embedding + c.final_norm + c.lm_head) * 2
    adapters = 2 * -(-trainable_params(arch, job) // arch.num_layers)  # bf16 gradient = bf16 reduce input
    # the layer, its adapters' gradient, the prefetched layer and the previous layer's reduce input
    assert working_set_bytes(arch, job, _plan()) == root + 2 * c.per_layer + adapters + 2 * c.per_layer + adapters
    assert root == 2 * (2 * 128256 * 8192 + 8192)  # 4.2 GB: the embedding and the untied lm_head
    # torchtune's full configs shard tok_embeddings and output apart (custom_sharded_layers): no root
    assert units(arch, Job(stack="torchtune", method="full"), _plan())[0] is None


def test_fsdp1_holds_no_reduce_scatter_input(catalogue) -> None:
    arch = catalogue.architecture("llama-2-70b")
    c = count_params(arch)
    root = (c.embedding + c.final_norm + c.lm_head) * 2
    full = Job(stack="litgpt-fsdp1", method="full")
    # FSDP1: the layer, its gradient, the prefetched layer; the root (wte, ln_f, lm_head) and the
    # lm_head's gradient, held until the root's post-backward
    assert working_set_bytes(arch, full, _plan()) == 3 * 2 * c.per_layer + root + 2 * c.lm_head
    lora = Job(stack="hf", method="lora")
    adapters = 2 * -(-trainable_params(arch, lora) // arch.num_layers)
    assert working_set_bytes(arch, lora, _plan()) == root + 2 * 2 * c.per_layer + adapters


def test_tp_shards_every_unit(catalogue) -> None:
    arch = catalogue.architecture("llama-3.1-8b")
    job = Job(stack="torchtitan", method="full")
    c = count_params(arch)
    moment = 6 * -(-c.per_layer // 8) + 4 * -(-(c.lm_head + c.final_norm) // 8)
    assert working_set_bytes(arch, job, _plan(num_gpus=64, tp=8)) == moment


def test_a_gathered_pipeline_stage_adds_one_units_16_bit_gradient(catalogue) -> None:
    arch = catalogue.architecture("llama-3.1-8b")
    job = Job(stack="torchtitan", method="full")
    plan = _plan(num_gpus=16, pp=2)
    c = count_params(arch)
    # the largest unit a stage may hold: the [norm, output] unit of the last stage (the overhead
    # is the same on every stage)
    assert overhead(arch, job, plan).zero3_live_params_bytes == 2 * max(c.per_layer, c.lm_head + c.final_norm, c.embedding)
