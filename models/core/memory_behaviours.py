"""Stack behaviours that change what a rank holds in memory (models/memory/, and the quantized
weights of models/architecture/quantization.py), each read in the stack's code and cited where it is
defined; registered in stack_behaviour.py."""

from __future__ import annotations

from vramplan.models.core.behaviour import Behaviour

# Stacks whose gradient accumulation under ZeRO-3 keeps the gradients unsharded until the last
# micro-batch: litgpt's finetune/pretrain scripts wrap every accumulating micro-batch in
# `fabric.no_backward_sync(model, enabled=is_accumulating)` (litgpt/finetune/lora.py L354, full.py
# L281 at 2685705 = v0.5.13). Under lora.py's ModelParallelStrategy (FSDP2, L158) that is
# `set_requires_gradient_sync(False)`: FSDP2 accumulates each trainable parameter's unsharded
# gradient and reduce-scatters it with the last micro-batch
# (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py); frozen parameters get none. Under
# full.py's FSDPStrategy (FSDP1, L108, one unit per Block) it is `FullyShardedDataParallel.no_sync`,
# whose post-backward hook returns before the reduce-scatter: the same bytes when every parameter
# trains. A full fine-tune holds a whole 16-bit gradient per rank, not its 1/N shard; so does
# litgpt-fsdp1's (lit-gpt up to v0.5.7, FSDP1 no_sync), whose LoRA runs keep more
# (MIXED_FLAT_PARAM_STACKS below).
UNSHARDED_ACCUMULATION_STACKS = Behaviour(
    "gradients kept unsharded until the last accumulated micro-batch", frozenset({"litgpt", "litgpt-fsdp1"}),
    "models/memory/model_states.py")

# Stacks whose launch configuration reduce-scatters FSDP's gradients every micro-batch where the
# trainer's default keeps them whole until the last: transformers' Trainer runs every micro-batch of
# a step but the last under `self.accelerator.no_sync(model)` unless the engine is DeepSpeed or
# `sync_each_batch` is set (trainer.py _inner_training_loop; transformers#34645 restored no_sync for
# FSDP), and accelerate's no_sync is FSDP2's `set_requires_gradient_sync(False)` (huggingface/accelerate
# v1.14.0 src/accelerate/accelerator.py no_sync, since #3762) or FSDP1's FullyShardedDataParallel.no_sync:
# every trainable gradient whole, in the reduce dtype accelerate sets to the compute dtype
# (utils/dataclasses.py set_mixed_precision: param_dtype = reduce_dtype). launch/hf.py writes
# `accelerator_config: {gradient_accumulation_kwargs: {sync_each_batch: true}}` under FSDP with
# accumulation, so the estimate (sharded gradients, a reduce-scatter each micro-batch) is the run it
# writes; models/memory/accumulation_note.py says what the default would hold.
SYNC_EACH_BATCH_STACKS = Behaviour(
    "the launch syncs FSDP's gradients every micro-batch (the Trainer's default holds them whole)", frozenset({"hf"}),
    "models/memory/accumulation_note.py")

# Stacks whose ZeRO-1 reduces the gradients in backward hooks at the step's last micro-batch and
# keeps only the rank's partition: DeepSpeed's stage_1_and_2 optimizer (the deepspeed stack; hf's
# ZeRO-1, which models/core/hf_engine.py always runs on DeepSpeed) with overlap_comm, which
# launch/deepspeed.py writes. deepspeedai/DeepSpeed edaa72212 deepspeed/runtime/zero/stage_1_and_2.py:
# L639-641 create the gradient hooks when overlap_comm or contiguous_gradients is set; process_gradients
# (L1758-1765) reduces `if self.partition_gradients or self.overlap_comm`, through
# reduce_ready_partitions_and_remove_grads (L1767-1769), which for stage 1 acts only
# `if ... self.is_gradient_accumulation_boundary()`: each gradient is copied into the IPG bucket
# and its own tensor freed, the partition's share kept in grads_in_partition (copy_grads_in_partition
# L1665-1680), or, under cpu_offload, copied to the host (L1650-1663). Before the boundary stage 1 does
# nothing in the hooks, so accumulating micro-batches hold every gradient whole. The ZeRO paper's
# stage 1 (P_os, arXiv:1910.02054 Fig. 1) holds them whole always: the other stacks' (Megatron's
# distributed optimizer keeps its whole contiguous grad buffer) and custom's.
HOOK_REDUCED_ZERO1_STACKS = Behaviour(
    "ZeRO-1 keeps only the gradient partition without accumulation (reduced in backward hooks)",
    frozenset({"deepspeed", "hf"}), "models/memory/model_states.py")

# Stacks whose FSDP1 units each flatten a decoder layer's frozen base weights with its LoRA
# adapters into one FlatParameter (use_orig_params=True), so the whole unit gets a gradient, held
# unsharded under no_sync while accumulating: lit-gpt 2023 to litgpt v0.5.7 (lit-gpt 8641822
# finetune/lora.py FSDPStrategy(auto_wrap_policy={Block}) and fabric.no_backward_sync; torch 2.1
# flat_param.py _validate_tensors_to_flatten, _runtime_utils.py _post_backward_hook; litgpt #1538
# (v0.5.8) wraps each Linear instead): models/memory/fsdp1_units.py mixed_unit_gradient_bytes.
MIXED_FLAT_PARAM_STACKS = Behaviour(
    "one FSDP1 flat parameter per block mixes frozen weights and adapters: the whole block gets a gradient",
    frozenset({"litgpt-fsdp1"}), "models/memory/fsdp1_units.py")

# Stacks whose attention runs one fused q/k/v projection with one LoRA dropout for all of its
# adapters: litgpt (litgpt/model.py CausalSelfAttention.qkv; litgpt/lora.py LoRAQKVLinear.forward:
# `after_A = F.linear(self.lora_dropout(x), self.lora_A)`, one dropped-out copy of x for q, k and v).
FUSED_QKV_DROPOUT_STACKS = Behaviour(
    "one LoRA dropout copy for the fused q/k/v projection", frozenset({"litgpt", "litgpt-fsdp1"}),
    "models/memory/activations.py")

# Stacks whose sequence parallelism is DTensor's: a column-parallel linear's input is redistributed
# from Shard(1) (the sequence) to Replicate() in the forward and the linear saves that all-gathered
# copy for its weight gradient (pytorch/torchtitan@9dec370 torchtitan/parallelisms/parallelize_llama.py
# apply_tp: "attention" / "feed_forward" PrepareModuleInput(input_layouts=Shard(1),
# desired_input_layouts=Replicate()), "output" ColwiseParallel(input_layouts=Shard(1))), where
# Megatron saves its sequence shard and all-gathers it again in the backward (Korthikanti sec. 4.2.2).
# Their linear inputs are held whole under SP.
GATHERED_SP_INPUT_STACKS = Behaviour(
    "sequence-parallel linears save their all-gathered input", frozenset({"torchtitan", "torchtitan-root-fsdp"}),
    "models/memory/parallel_activations.py")

# Stacks whose tensor parallelism computes the eager cross-entropy vocab-parallel through
# torch.distributed.tensor.parallel.loss_parallel: torchtitan, on by default whenever tp > 1
# (pytorch/torchtitan@9dec370 torchtitan/parallelisms/parallel_dims.py loss_parallel_enabled
# `self.tp > 1 and self.enable_loss_parallel`, --training.disable_loss_parallel off; utils.py
# get_train_context enters `loss_parallel()`; train.py `del pred` before `loss.backward()`).
LOSS_PARALLEL_STACKS = Behaviour(
    "the eager loss runs under torch's loss_parallel with TP", frozenset({"torchtitan", "torchtitan-root-fsdp"}),
    "models/memory/loss.py")

# Stacks whose FSDP wraps the decoder layers and leaves the embedding, final norm and lm_head to the
# root unit, which is then gathered through the whole backward (models/memory/fsdp.py: the lm_head's
# backward comes first, the embedding's last): hf (accelerate's TRANSFORMER_BASED_WRAP on the
# model's `_no_split_modules`, and PEFT's fsdp_auto_wrap_policy, which adds only the LoRA modules:
# huggingface/peft@5d602fd examples/sft/configs/fsdp_config_qlora.yaml, peft/utils/other.py
# fsdp_auto_wrap_policy); torchtune's LoRA recipe (pytorch/torchtune@30b8519e8
# recipes/lora_finetune_distributed.py shards only `layers.i`; v0.6.1 70B_lora.yaml leaves
# custom_sharded_layers commented out; its full configs shard tok_embeddings and output apart:
# models/memory/fsdp.py root_holds_ends); litgpt's FSDP2 LoRA (Lightning-AI/litgpt@2685705
# finetune/lora.py parallelize_fn: Blocks, then `fully_shard(model)` over wte, ln_f and lm_head) and
# lit-gpt's FSDP1 (FSDPStrategy(auto_wrap_policy={Block}): the root FlatParameter holds them).
# torchtitan before 83e6941 (#1094, 2025-07-28), the torchtitan-root-fsdp stack: apply_fsdp shards
# each TransformerBlock, then `fully_shard(model, **fsdp_config, reshard_after_forward=not pp_enabled)`
# over tok_embeddings, norm and output (pytorch/torchtitan@9dec370
# torchtitan/parallelisms/parallelize_llama.py L325-339, @e7c0cae
# torchtitan/models/llama3/parallelize_llama.py L344-367: its 2024-12 and 2025-06 benchmarks).
# Not torchtitan: v0.2.2 wraps tok_embeddings and [norm, output] apart (SEPARATE_END_UNITS_STACKS).
ROOT_GATHERED_STACKS = Behaviour(
    "FSDP's root unit (embedding, final norm, lm_head) stays gathered",
    frozenset({"hf", "torchtune", "litgpt", "litgpt-fsdp1", "torchtitan-root-fsdp"}), "models/memory/fsdp.py")

# Stacks that quantise through Lightning Fabric's BitsandbytesPrecision (litgpt finetune/lora.py
# `--quantize bnb.*`: `plugins = BitsandbytesPrecision(quantize[4:], dtype)`, Lightning-AI/litgpt@e5493986
# and @2685705). Three facts of that path, read in Lightning-AI/pytorch-lightning@b19eba3
# src/lightning/fabric/plugins/precision/bitsandbytes.py and litgpt@e5493986:
# - `module_init_context` swaps `torch.nn.Linear` for the bnb class while the model is built
#   (`_ClassReplacementContextManager({"torch.nn.Linear": self._linear_cls})`), so every linear is
#   quantised, the lm_head included (litgpt/lora.py GPT.__init__: `self.lm_head = LoRALinear(...)`,
#   whose `self.linear = torch.nn.Linear(...)`); litgpt's lm_head is its own module, never tied to
#   the embedding (litgpt/model.py GPT.__init__), so a tied checkpoint gets a second, quantised copy;
# - `_Linear4bit.quantize` quantises `weight.contiguous().to(device=device, dtype=torch.half)`: the
#   quant state's dtype is fp16, so dequantising a matrix for the bf16 GEMM makes an fp16 copy and
#   then its bf16 cast (bitsandbytes@4870580 (0.42.0) autograd/_functions.py MatMul4Bit.forward
#   `F.dequantize_4bit(B, quant_state).to(A.dtype)`, and the same in backward): 2 + 2 bytes a weight;
# - bitsandbytes before 0.43.2 (litgpt's code warns that it "only supports bitsandbytes v0.42.0",
#   finetune/lora.py @2685705) keeps each quantised linear's input as a plain ctx attribute
#   (MatMul4Bit.forward `ctx.tensors = (A, B)`, MatMul8bitLt `ctx.tensors = (CAt, subA, A)`), which
#   autograd does not release after backward; litgpt's loop keeps the step's graph alive through the
#   next micro-batch's forward (`logits = model(input_ids, lm_head_chunk_size=128)` rebinds the
#   previous `logits` only when that forward returns): models/memory/beyond_saved.py held_inputs_bytes.
#   bitsandbytes@9e75374 (#1270, 0.43.2) stopped keeping A.
LIGHTNING_BNB_STACKS = Behaviour(
    "QLoRA through Lightning Fabric's bitsandbytes plugin", frozenset({"litgpt", "litgpt-fsdp1"}),
    "models/architecture/quantization.py")

# Stacks that quantise QLoRA's base through transformers' BitsAndBytesConfig, whose MoE families keep
# their routed experts as fused 3-D parameters that bitsandbytes never quantises: hf and deepspeed (the
# HF Trainer with a DeepSpeed config). transformers 5.24 integrations/bitsandbytes.py
# replace_with_bnb_linear replaces a module only where `isinstance(module, Conv1D) or type(module) is
# nn.Linear`, and every MoE family vramplan reads stores its experts as `nn.Parameter(torch.empty(
# num_experts, ...))` (models/qwen3_moe/modeling_qwen3_moe.py Qwen3MoeExperts `gate_up_proj`,
# `down_proj`; mixtral, deepseek_v2/v3, gpt_oss, llama4 alike); the sequential Llama 4 experts that
# quantizers/base.py MODULES_TO_PATCH_FOR_QUANTIZATION provides are only swapped in for a
# pre-quantised checkpoint (`if self.pre_quantized: self._convert_model_for_quantization(model)`).
# bitsandbytes-foundation/bitsandbytes#1849 (open): "fused experts ... are silently skipped and stay
# full precision". Measured on CPU with transformers 5.24 and bitsandbytes 0.50.2
# (tests/models/memory/test_unquantised_experts.py): load_in_4bit leaves qwen3_moe, mixtral,
# deepseek_v3, llama4_text and gpt_oss experts as bf16 Parameters beside Params4bit attention and shared
# experts. PEFT's prepare_model_for_kbit_training then casts them to fp32 with every other
# non-Params4bit parameter (peft/utils/other.py). Unsloth converts them to Params4bit itself
# (unslothai/unsloth-zoo#527, merged 2026-03), and litgpt's and torchtune's own models build their
# experts from linears they quantise.
UNQUANTISED_EXPERTS_STACKS = Behaviour(
    "bitsandbytes leaves transformers' fused MoE experts 16-bit (PEFT's preparation makes them fp32)",
    frozenset({"hf", "deepspeed"}), "models/architecture/quantization.py")

# Stacks whose QLoRA base is torchao's NF4Tensor, not a bitsandbytes Params4bit: torchtune
# (pytorch/torchtune@30b8519e8 torchtune/modules/peft/lora.py L95 `to_nf4(linear.weight)` when
# quantize_base). Under FSDP2 the
# NF4Tensor is one tensor subclass that shards and all-gathers its quantised data, scalers and
# quantisation factors together (pytorch/ao@a584e2427 torchao/dtypes/nf4tensor.py L853-875
# `fsdp_pre_all_gather` returns (quantized_scalers, quantization_factor, quantized_data), L877-928
# `fsdp_post_all_gather` rebuilds the NF4Tensor): its quantisation state is sharded with the data and
# the gathered layer is NF4, not 16-bit. A bitsandbytes base keeps its quant state (absmax) as a
# module attribute outside the sharded parameter (models/memory/model_states.py
# resident_quant_state_bytes); both gather the quantised storage (models/memory/overhead.py).
TORCHAO_NF4_STACKS = Behaviour(
    "QLoRA's NF4 base is torchao's NF4Tensor: FSDP shards its quantisation state with it", frozenset({"torchtune"}),
    "models/architecture/quantization.py")

# Stacks whose training loop drops its own reference to the logits before the backward, so that
# the output layer's and the loss's saved tensors are freed by the loss's backward, before any
# decoder layer runs its backward: torchtune (pytorch/torchtune@30b8519e8
# recipes/lora_finetune_single_device.py L648-652 and recipes/lora_finetune_distributed.py
# L744-747: `loss = self._loss_fn(logits, labels)`, "free logits otherwise it peaks backward
# memory", `del logits`; full_finetune_single_device.py L522-524 the same). Autograd frees a node's saved
# tensors once its backward has run (retain_graph False), so a layer's backward peak does not
# stack on the logits: models/memory/activations.py stage_activations.
LOGITS_RELEASED_STACKS = Behaviour(
    "the logits are freed before the decoder layers' backward", frozenset({"torchtune"}),
    "models/memory/activations.py")

# Stacks whose ZeRO-3 is FSDP2 (torch.distributed.fsdp.fully_shard): torchtitan (pytorch/torchtitan@73a0e69
# torchtitan/models/llama3/infra/parallelize.py apply_fsdp), torchtune (pytorch/torchtune@30b8519e8
# torchtune/training/_distributed.py shard_model), litgpt's LoRA (Lightning-AI/litgpt@2685705
# finetune/lora.py ModelParallelStrategy, parallelize_fn; its full fine-tune is FSDP1:
# models/memory/fsdp.py fsdp_version). While a unit runs its backward FSDP2 holds its unsharded
# parameters and gradients, the next unit prefetched and the previous unit's reduce-scatter input
# (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py pre_backward, _backward_prefetch,
# post_backward; _fsdp_collectives.py foreach_reduce), and its all-gather stream's pool stays reserved.
FSDP2_STACKS = Behaviour(
    "ZeRO-3 is FSDP2: a unit, its gradient, the prefetched unit and the previous reduce-scatter input in backward",
    frozenset({"torchtitan", "torchtitan-root-fsdp", "torchtune", "litgpt"}), "models/memory/fsdp.py")

# Stacks whose ZeRO-3 is FSDP1 (FullyShardedDataParallel, FULL_SHARD): hf (accelerate's FSDP plugin,
# fsdp_version 1 by default; BackwardPrefetch.BACKWARD_PRE, limit_all_gathers) and lit-gpt's
# FSDPStrategy (litgpt-fsdp1). A unit, its gradient and the prefetched unit in backward; the
# reduce-scatter frees its input in the unit's own post-backward (torch/distributed/fsdp/_runtime_utils.py
# _reduce_grad).
FSDP1_STACKS = Behaviour(
    "ZeRO-3 is FSDP1: a unit, its gradient and the prefetched unit in backward",
    frozenset({"hf", "litgpt-fsdp1"}), "models/memory/fsdp.py")

# Stacks whose FSDP2 MixedPrecisionPolicy reduces in fp32: torchtitan (pytorch/torchtitan@73a0e69
# parallelize.py apply_fsdp `MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=reduce_dtype)`,
# reduce_dtype from --parallelism.mixed_precision_reduce, default "float32"): the reduce-scatter input
# is fp32, twice the bf16 gradient (_fsdp_collectives.py foreach_reduce).
FP32_REDUCE_STACKS = Behaviour(
    "FSDP2 reduce-scatters gradients in fp32", frozenset({"torchtitan", "torchtitan-root-fsdp"}), "models/memory/fsdp.py")

# Stacks whose FSDP wraps the embedding and the lm_head as units of their own, so no root unit
# stays gathered: torchtitan from 83e6941 (#1094) on, v0.2.2 (73a0e69) included: apply_fsdp
# `fully_shard(model.tok_embeddings, ...)`, each block, `fully_shard([model.norm, model.output],
# reshard_after_forward=reshard_after_forward_policy == "always")`, then `fully_shard(model)` with no
# parameter left. The [norm, output] unit is the first of the backward, the embedding the last
# (models/memory/fsdp.py units). torchtitan's published 2024-12 and 2025-06 runs (9dec370, e7c0cae)
# had the root hold all three (ROOT_GATHERED_STACKS' behaviour): the torchtitan-root-fsdp stack.
SEPARATE_END_UNITS_STACKS = Behaviour(
    "FSDP wraps the embedding and [final norm, lm_head] as units of their own", frozenset({"torchtitan"}),
    "models/memory/fsdp.py")

# Stacks whose ZeRO-0 on several GPUs is torch DDP with gradient_as_bucket_view False (its default),
# so the Reducer's flat buckets hold a second copy of every trainable gradient all run (torch 2.13
# torch/nn/parallel/distributed.py L731-742, L828; reducer.cpp Reducer::initialize_buckets
# `bucket.gradients = at::empty(...)`): hf's Trainer and unsloth through accelerate
# (huggingface/accelerate@v1.14.0 utils/dataclasses.py L188 `gradient_as_bucket_view: bool = False`),
# torchtitan's apply_ddp (pytorch/torchtitan@73a0e69 torchtitan/models/llama3/infra/parallelize.py
# L363-373 `replicate(model, device_mesh=dp_mesh, bucket_cap_mb=100)`).
DDP_BUCKET_COPY_STACKS = Behaviour(
    "ZeRO-0 is torch DDP: its Reducer's buckets copy every trainable gradient",
    frozenset({"hf", "unsloth", "torchtitan", "torchtitan-root-fsdp"}), "models/memory/dp_buffers.py")

# Stacks whose data-parallel collectives run in place in contiguous gradient and parameter buffers
# that are the model states themselves: Megatron's DDP and distributed optimizer
# (NVIDIA/Megatron-LM@d98e8a6 megatron/core/distributed/param_and_grad_buffer.py start_grad_sync
# L718-732: reduce-scatter into the shard view of bucket.grad_data, all-reduce of bucket.grad_data;
# start_param_sync L508-525: all-gather into bucket.param_data). No bucket besides.
# Stacks whose ZeRO-2 and ZeRO-3 are Megatron-FSDP v1 (--use-megatron-fsdp, sharding strategies
# optim_grads and optim_grads_params; NVIDIA/Megatron-LM@d98e8a64 megatron/core/distributed/fsdp):
# decoder layers are its units, the embedding and output layer stay gathered under ZeRO-3, and its
# default windows prefetch 5e8 and queue 1e9 elements (models/memory/megatron_fsdp.py).
MEGATRON_FSDP_STACKS = Behaviour(
    "ZeRO-2/3 are Megatron-FSDP: layer units, the ends gathered, a 5e8-element prefetch and a 1e9-element reduce queue",
    frozenset({"megatron"}), "models/memory/megatron_fsdp.py")


def runs_megatron_fsdp(stack: str, zero: int) -> bool:
    """Whether a plan's data parallelism is Megatron-FSDP: ZeRO-2 or -3 on a MEGATRON_FSDP_STACKS stack."""
    return stack in MEGATRON_FSDP_STACKS and zero >= 2

IN_PLACE_DP_BUFFER_STACKS = Behaviour(
    "data-parallel reduce and all-gather run in place in the contiguous gradient and parameter buffers",
    frozenset({"megatron"}), "models/memory/dp_buffers.py")

# Stacks whose runs on several GPUs always shard with FSDP, whatever ZeRO stage a plan names:
# torchtune's distributed recipes (launch/torchtune.py: a ZeRO-0/1 plan "holds less than planned"),
# litgpt (finetune/*.py: FSDP whenever devices > 1; catalogues/stack_capabilities.csv "0 only with one
# device"). Their data-parallel buffers are FSDP's unsharded gradient and reduce-scatter input.
ALWAYS_SHARDED_STACKS = Behaviour(
    "several GPUs always run FSDP: a ZeRO-0 plan's buffers are FSDP's gradient and reduce-scatter input",
    frozenset({"torchtune", "litgpt", "litgpt-fsdp1"}), "models/memory/dp_buffers.py")

# Stacks whose data-parallel engine depends on the plan: hf (models/core/hf_engine.py) runs ZeRO-0 as
# torch DDP (DeepSpeed's with CP), ZeRO-1 as DeepSpeed, ZeRO-2 as FSDP2 or, with offload "optimizer"
# or EP, DeepSpeed, and every stage as DeepSpeed with TP over several replicas (AutoTP).
DP_ENGINE_BY_PLAN_STACKS = Behaviour(
    "the data-parallel engine (DDP, FSDP2 or DeepSpeed) depends on the plan's stage, offload and layout",
    frozenset({"hf"}), "models/memory/dp_buffers.py")

# Stacks whose pipeline parallelism is torch.distributed.pipelining, whose stages allocate one
# activation receive buffer and one gradient receive buffer per micro-batch of the step at setup
# and hold them all step (torch/distributed/pipelining/stage.py _PipelineStageBase
# _prepare_backward_infra: `for mb_index in range(num_microbatches): self.grad_recv_info[mb_index] =
# self._create_grad_recv_info(...)`, _make_tensor_from_meta; PipelineStage / _PipelineStage
# _prepare_forward_infra: `for chunk in range(num_microbatches): self.args_recv_info[chunk] =
# self._create_act_recv_info()`; pytorch/pytorch#136380 "couldn't we keep a maximum of Y buffers";
# the just-in-time allocation of #193872 / #196463 had not landed by 2026-09), and whose fwd_cache
# keeps each micro-batch's stage output from its forward to its backward (forward_one_chunk
# `self.fwd_cache[fwd_chunk_id] = (output_tuple, flat_input_args)`, popped in backward_one_chunk;
# #194119: "A pipeline stage keeps every forward output alive"): torchtitan's PP
# (torchtitan/distributed/pipeline_parallel.py builds PipelineStage per model chunk).
TORCH_PIPELINING_STACKS = Behaviour(
    "pipeline stages hold a receive buffer per micro-batch, for activations and gradients, all step",
    frozenset({"torchtitan", "torchtitan-root-fsdp"}), "models/memory/pipeline_buffers.py")

# Stacks whose torch kept each stage input's gradient on its receive buffer's .grad until the next
# step: stage_backward computed the input gradients into the leaf buffers' .grad and nothing freed
# them before the next step's zero_grad, until pytorch/pytorch#164329 (2025-10-01, "Optimize memory
# by early releasing stage inputs' gradients", measured on torchtitan 1F1B). torchtitan's own 2024-12
# (9dec370) and 2025-06 (e7c0cae) benchmarks ran on torch nightlies before it: the
# torchtitan-root-fsdp stack.
RETAINED_INPUT_GRAD_STACKS = Behaviour(
    "each pipeline stage input's gradient stays on its receive buffer until the next step",
    frozenset({"torchtitan-root-fsdp"}), "models/memory/pipeline_buffers.py")

# Stacks whose mixed-precision optimizer step copies a 16-bit gradient buffer to fp32 and keeps the
# copies until the next step's zero_grad: Megatron-LM (NVIDIA/Megatron-LM@d98e8a64
# megatron/core/optimizer/optimizer.py Float16OptimizerWithFloat16Params._copy_model_grads_to_main_grads
# L1097 `main_param.grad = model_param.main_grad.float()`, called by prepare_grads L751 before
# optimizer.step() L786; distrib_optimizer.py L2792 `shard_main_param.grad = shard_model_grad.float()`,
# the distributed optimizer's shard only; freed by zero_grad(set_to_none=True), optimizer.py L59-70,
# at the next train_step's start, megatron/training/training.py L3044, before its forward).
# Tensor.float() returns the tensor itself when it is fp32 already, so only a 16-bit buffer is
# copied: grad_dtype = torch.float if grad_reduce_in_fp32 else param.dtype (param_and_grad_buffer.py
# L924), grad_reduce_in_fp32 = args.accumulate_allreduce_grads_in_fp32 (training.py L2635), which
# --fp16 leaves off unless given (arguments.py L3069) and bf16 turns on unless --grad-reduce-in-bf16
# (arguments.py L1204-1217).
STEP_FP32_GRAD_COPY_STACKS = Behaviour(
    "the optimizer step holds an fp32 copy of a 16-bit gradient buffer (its shard under the distributed "
    "optimizer) until the next step's zero_grad", frozenset({"megatron"}), "models/memory/model_states.py")

# Stacks whose ZeRO optimizer is DeepSpeed's, whose step flattens the 16-bit gradients of one step
# unit into a new tensor and casts it to the fp32 master's dtype, the fp32 gradient held while that
# unit steps: stage 1/2 a parameter group's whole partition (deepspeedai/DeepSpeed v0.19.8
# runtime/zero/stage_1_and_2.py step: `single_grad_partition = self.flatten(self.averaged_gradients[i])
# .to(self.single_partition_of_fp32_groups[i].dtype)`, freed after `_optimizer_step(i)` by `del
# single_grad_partition`), stage 3 one sub-group of the partition, of at most sub_group_size (1e9)
# elements (stage3.py _prepare_fp32_grad_for_sub_group, the same flatten().to(); released after the
# sub-group's step). At the cast both copies are live: 2 + 4 bytes an element. Measured on CPU (torch
# 2.13.0, DeepSpeed 0.19.8, gloo; tests/tools/deepspeed_step_probe.py): 12 bytes an element of the
# unit above the step's start, of which 6 the copies and 8 at once during torch's single-tensor CPU Adam
# (its denominator's two temporaries beside the fp32 gradient); on CUDA DeepSpeed's FusedAdam makes
# no temporaries, so the cast's 6 is the peak. hf runs DeepSpeed for some plans only
# (DP_ENGINE_BY_PLAN_STACKS, by count, TP, EP and CP): not counted there.
DEEPSPEED_STEP_COPY_STACKS = Behaviour(
    "the optimizer step flattens a step unit's 16-bit gradients and casts them to fp32 (a partition, a "
    "ZeRO-3 sub-group of at most 1e9 elements): 6 bytes an element beside the states",
    frozenset({"deepspeed"}), "models/memory/model_states.py")

# Stacks whose EP dispatcher on DeepEP / HybridEP (Job.moe_dispatcher) allocates its own
# communication buffers once per process, outside torch's allocator: Megatron's flex dispatcher
# (NVIDIA/Megatron-LM@d98e8a64 megatron/core/transformer/moe/fused_a2a.py get_buffer L36-69:
# deep_ep.Buffer; init_hybrid_ep_buffer L340-347: HybridEPBuffer) and torchtitan's DeepEP backend,
# whose v0.2.2 get_buffer is Megatron's line for line (pytorch/torchtitan@73a0e69
# torchtitan/distributed/deepep/deepep.py L294-317: the same Config size hints, DeepEP's default 20
# SMs, no low-latency mode; its group the EP mesh, expert_parallel.py L344). torchtitan main's
# DeepEP v2 ElasticBuffer is sized otherwise (by the tokens a micro-batch holds): not the stack's release.
FLEX_DISPATCHER_BUFFER_STACKS = Behaviour(
    "the DeepEP / HybridEP dispatcher's communication buffers, outside torch's allocator",
    frozenset({"megatron", "torchtitan"}), "models/memory/dispatcher_buffers.py")
