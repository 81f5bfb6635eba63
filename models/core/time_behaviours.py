"""Stack behaviours that change how long a step takes (models/time/), each read in the stack's
code and cited where it is defined; registered in stack_behaviour.py."""

from __future__ import annotations

from vramplan.models.core.behaviour import Behaviour

# Stacks whose uncompiled blocks pay the element-wise HBM traffic that torch.compile's fusion
# removes (models/time/compile_speed.py's module docstring: torchtitan and torchtune run eager
# element-wise ops unless compiled; hf and deepspeed keep the calibrated fused-kernel speed).
EAGER_ELEMENTWISE_STACKS = Behaviour(
    "uncompiled blocks pay the element-wise HBM traffic", frozenset({"torchtitan", "torchtitan-root-fsdp", "torchtune"}),
    "models/time/compile_speed.py")

# Stacks whose TP waits for each backward collective before more compute runs: torchtitan's TP is
# torch's DTensor styles (pytorch/torchtitan@820504e torchtitan/models/llama3/parallelize_llama.py
# apply_tp: PrepareModuleInput Shard(1) -> Replicate() before "attention" and "feed_forward",
# colwise wq/wk/wv/w1/w3, rowwise wo/w2 to Shard(1)). In the backward, torch's Redistribute.backward
# (pytorch/pytorch@012e4b9 torch/distributed/tensor/_redistribute.py) issues the reduce-scatter of a colwise input's
# gradient only once the linear's backward (its grad-input and weight-gradient GEMMs) has run, and
# the rowwise output's all-gather feeds that linear's GEMMs; the result is waited on at its first
# use (torch/distributed/_functional_collectives.py _maybe_wrap_tensor: an AsyncCollectiveTensor in
# eager, `wait_tensor` right after the collective when traced), which is the next op. Compiled
# blocks (apply_compile: torch.compile(transformer_block, fullgraph=True)) keep that order:
# torch/_inductor/config.py reorder_for_compute_comm_overlap = False. Megatron instead issues them
# beside the GEMMs (LinearWithGradAccumulationAndAsyncCommunication). torchtitan's
# --parallelism.enable_async_tensor_parallel (default False, config_manager.py @820504e) micro-
# pipelines them with the GEMMs: not modelled.
SERIAL_TP_BACKWARD_STACKS = Behaviour(
    "TP's backward collectives run between the GEMMs, not beside them", frozenset({"torchtitan", "torchtitan-root-fsdp"}),
    "models/time/parallel_time.py")

# Stacks whose distributed optimizer (ZeRO-1) all-gathers the updated parameters layer by layer
# behind the next step's first forward: Megatron's DDP with overlap_param_gather, which
# Megatron-Bridge's recipes set ("reduce-scatter of gradients and all-gather of updated parameters
# ... chunked by the granularity of a Transformer layer and overlaps each communication chunk with
# computation", docs/training/communication-overlap.md; megatron/core/distributed/
# distributed_data_parallel_config.py overlap_param_gather) and vramplan's Megatron launch config
# writes (--overlap-param-gather, launch/configs.py). DeepSpeed's ZeRO-1 gathers them in its step,
# after the update (deepspeed/runtime/zero/stage_1_and_2.py step: all_gather_dp_groups), so nothing
# hides it. models/time/performance.py dp_windows_s.
PARAM_GATHER_OVERLAP_STACKS = Behaviour(
    "ZeRO-1's parameter all-gather runs behind the next step's first forward", frozenset({"megatron"}),
    "models/time/performance.py")

# Stacks whose interleaved pipeline sends and receives each chunk's activations and gradients
# while the next chunk computes: Megatron-LM's --overlap-p2p-communication is on by default
# (NVIDIA/Megatron-LM@d98e8a6 megatron/training/arguments.py: `--no-overlap-p2p-communication`,
# store_false, dest overlap_p2p_comm; validate_args turns it off without an interleaved schedule),
# and Megatron-Bridge sets it whenever vpp > 1 (NVIDIA-NeMo/Megatron-Bridge@5776a6d
# src/megatron/bridge/training/comm_overlap.py _get_model_comm_overlap_cfgs: `overlap_p2p_comm =
# True` if vp_size > 1, else batch_p2p_comm). forward_backward_pipelining_with_interleaving
# (megatron/core/pipeline_parallel/schedules.py) then posts each 1F1B steady-state transfer after
# its chunk (pp_post_forward / pp_post_backward) and waits on it only before the chunk that needs
# it (pp_pre_forward / pp_pre_backward), one chunk of the other direction later; the warmup and
# cool-down transfers stay blocking (overlap_p2p_comm_warmup_flush defaults to False,
# megatron/core/model_parallel_config.py), a fixed number of chunks per step, not modelled.
OVERLAPPED_P2P_STACKS = Behaviour(
    "the interleaved schedule's steady-state p2p runs beside the compute", frozenset({"megatron"}),
    "models/time/parallel_time.py")

# Stacks whose context parallelism is torch's ring attention (torch.distributed.tensor.experimental
# context_parallel): torchtitan (pytorch/torchtitan@9dec370 train.py create_context_parallel_ctx,
# utils.py: set_rotate_method(--experimental.context_parallel_rotate_method, default 'allgather')).
# Its forward all-gathers the K/V shards once, as repeated to the query heads (model.py repeat_kv
# before F.scaled_dot_product_attention), its backward gathers them again and rotates dK/dV in fp32
# every block; eager the all-gather hides only behind the first block, compiled nothing hides
# (torch/distributed/_functional_collectives.py _maybe_wrap_tensor). Megatron-Core's (TE
# AttnFuncWithCPAndKVP2P) sends the KV heads' K/V block by block beside each block's attention.
TORCH_RING_CP_STACKS = Behaviour(
    "context parallelism is torch's all-gather ring attention, its collectives waited on in the blocks",
    frozenset({"torchtitan", "torchtitan-root-fsdp"}), "models/time/ring_attention.py")

# Stacks whose tensor parallelism under tensorwise Float8 all-gathers float8: torchtitan's apply_tp
# swaps in torchao's Float8ColwiseParallel / Float8RowwiseParallel / PrepareFloat8ModuleInput
# whenever float8 is on and the recipe is not rowwise (pytorch/torchtitan@9dec370
# torchtitan/parallelisms/parallelize_llama.py L147-167 `if enable_float8`; @820504e
# torchtitan/models/llama3/parallelize_llama.py L56-65 and @73a0e69 (v0.2.2)
# torchtitan/models/llama3/infra/parallelize.py L77-86 `enable_float8_tensorwise_tp = enable_float8_linear
# and not float8_is_rowwise`, recipe_name default None = tensorwise, the stacks' fp8_recipe torchao).
# torchao/float8/float8_tensor_parallel.py (pytorch/ao@36027d8): PrepareFloat8ModuleInput casts the
# attention / feed_forward input to float8 e4m3 before its Shard(1) -> Replicate() redistribute, and
# Float8RowwiseParallel's NoopFwToFloat8BwDynamic casts wo / w2's output gradient to e5m2 before the
# backward of their Partial -> Shard(1) redistribute, which is a Shard(1) -> Replicate() all-gather
# (torch/distributed/tensor/_redistribute.py _redistribute_backward, torch 2.13: "for backward shard ->
# partial, we just do shard -> replicate"); float8_ops.py allgather_fp8 gathers the 1-byte data. The
# reduce-scatters (wo / w2's forward output, the attention / MLP input gradients) reduce bf16. Only
# the dense blocks' plan: torchtitan's MoE models keep bf16 (deepseek_v3 raises on a float8 TP plan,
# gpt_oss passes enable_float8_tensorwise_tp=False, llama4 / qwen3's MoE layers are not Float8
# styles), so vramplan applies it to dense architectures. torchtitan removed it in 1786292 / 6348d93
# (2026-04, config-based sharding): after the modelled versions.
FLOAT8_TP_STACKS = Behaviour(
    "tensorwise Float8 TP all-gathers float8 (forward inputs, backward output gradients)",
    frozenset({"torchtitan", "torchtitan-root-fsdp"}), "models/time/parallel_time.py")

# Stacks whose MoE token dispatcher reorders the routed copies in kernels of their own, each a
# pass of hidden rows through HBM: Megatron-Core's alltoall dispatcher (NVIDIA/Megatron-LM@92c8482e
# megatron/core/transformer/moe/token_dispatcher.py MoEAlltoAllTokenDispatcher: permute L638,
# sort_chunks_by_idxs L733 / L768, unpermute L834) and its DeepEP path (_DeepepManager permute L1309,
# unpermute L1321) with TE's fused permute kernels, and TEGroupedMLP's fp8 padding
# (megatron/core/transformer/moe/experts.py L819-L978).
TOKEN_PERMUTATION_STACKS = Behaviour(
    "the MoE dispatcher's token permutations, chunk sort and fp8 padding stream the routed rows through HBM",
    frozenset({"megatron"}), "models/time/moe_permute.py")

# Stacks whose dropless MoE layer waits, every forward, for the host: Megatron-Core's EP token
# dispatchers need the routed token counts on the CPU before the layer can go on. The alltoall
# dispatcher copies them to the host and synchronizes (NVIDIA/Megatron-LM@d98e8a64
# megatron/core/transformer/moe/token_dispatcher.py: preprocess L596
# `_maybe_update_cuda_sync_point("before_ep_alltoall")`, `before_finish` without EP;
# _maybe_dtoh_and_synchronize L958 `self.d2h_event.synchronize()`, unless the layer drops and pads
# to a capacity); DeepEP's dispatch blocks the CPU until the GPU's counts arrive
# (megatron/core/transformer/moe/fused_a2a.py L107-108: "the CPU will wait for GPU's signal to
# arrive, so this is not compatible with CUDA graph"); TEGroupedMLP reads the per-expert split sizes
# as a Python list (experts.py L897 / L916 `tokens_per_expert.tolist()`), and Transformer Engine
# launches one cuBLAS GEMM per local expert (NVIDIA/TransformerEngine@d0067d0d
# transformer_engine/common/gemm/cublaslt_gemm.cu L970 multi_stream_cublas_gemm: `for (int i = 0; i <
# num_gemms; i++) ... nvte_cublas_gemm_v2`). So after each sync the GPU's queue is empty and the
# layer runs no faster than the host launches it (models/time/moe_host.py); a full-iteration CUDA
# graph (Job.cuda_graphs) replays the step without the host.
HOST_SYNCED_MOE_STACKS = Behaviour(
    "a dropless MoE layer's forward waits for the host, which launches each local expert's GEMMs",
    frozenset({"megatron"}), "models/time/moe_host.py")
