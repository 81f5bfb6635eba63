"""What an uncompiled run loses to its unfused element-wise ops: the time torch.compile saves.

The compute efficiency (models/time/calibration.py) is fitted to runs whose element-wise work is
fused: Megatron's Transformer Engine kernels, llm-foundry's, torchtitan compiled. An eager block
runs every norm, RoPE, SiLU, product and residual add as its own kernel, each reading and writing
its tensors in HBM (the RMSNorm's fp32 copies among them), where inductor fuses them into a few
kernels. That traffic is memory-bound, so it costs bytes / HBM bandwidth on top of the matmuls.

Bytes per token and decoder layer that compile removes, bf16, measured with torch 2.13 on CPU on
torchtitan's Llama block (models/llama3 at e7c0cae: nn.RMSNorm, complex RoPE, SDPA, SwiGLU;
h 256-512, f 512-1024; tests/models/memory/test_compile.py): every aten op but the matmuls and
SDPA counted by a TorchDispatchMode (inputs + outputs) eager, against the read/write sizes of
inductor's generated kernels (GraphLowering.count_bytes, extern kernels excluded) compiled:

| pass     | eager           | compiled       | removed        |
|----------|-----------------|----------------|----------------|
| forward  | 125.7 h + 10 f  | 37.1 h + 6 f   | 88.7 h + 4 f   |
| backward | 278.0 h + 18 f  | 57.4 h + 10 f  | 220.6 h + 8 f  |

Recompute runs the forward's element-wise ops again in the backward (torchtitan's per-op SAC
saves only matmul and SDPA outputs; full recompute reruns the block). The loss: eager
`cross_entropy(pred.float())` moves 44 bytes per token and vocabulary entry (upcast, log_softmax,
nll_loss and their backward), compiled 8 (ELEMENTWISE_LOSS_BYTES_PER_LOGIT).

The bytes run at HBM_FRACTION of the GPU's HBM bandwidth, the one fitted number: torchtitan's own
benchmark ran Llama 3.1 8B with and without torch.compile of the blocks (the loss uncompiled in
both, torchtitan 9dec370) on 8 and 128 H100 (benchmarks/llama3_h100_202412_torchtitan.md Tables
1 and 3: 5,762 vs 6,667 and 5,605 vs 6,514 tokens/s/GPU, tests/data/measured_throughput.csv); the
fraction that reproduces both ratios (1.157, 1.162) is 0.80 (0.82 and 0.79 apart), inside the 0.7-0.9
that large streaming kernels reach. Per GPU generation the cost then follows the ratio of matmul
rate to HBM bandwidth: uncompiled, Llama 3.1 8B (FSDP, op SAC, 2 x 8192 tokens) runs 15% slower than
with its blocks and loss compiled on H100, 11% on A100 and H200, 7% on B200 (tests/models/time/test_compile_speed.py).

Which stacks: EAGER_ELEMENTWISE_STACKS, those whose blocks this was measured on (torchtitan) or
that run the same block code with a compile switch (torchtune's TransformerSelfAttentionLayer:
RMSNorm in fp32, RoPE, SwiGLU; torchtune/training/_compile.py). Hugging Face and DeepSpeed keep
the calibrated efficiency uncompiled: no published run compares their eager and compiled speed
(docs/fidelity.md). Fused kernels (Megatron, Unsloth) have nothing to fuse.
"""

from __future__ import annotations

from vramplan.models.architecture.params import layer_groups
from vramplan.models.core.catalogue_schema import Architecture, GpuSpec
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.stack_behaviour import EAGER_ELEMENTWISE_STACKS
from vramplan.models.core.units import BYTES_PER_GB
from vramplan.models.memory.precision import activation_bytes
from vramplan.models.memory.recompute import effective_mode, recomputed_fraction
from vramplan.models.time.calibration import Efficiency

# Element-wise bytes per token and layer that torch.compile removes, bf16: (per hidden unit, per MLP unit).
ELEMENTWISE_FORWARD_BYTES = (88.7, 4.0)
ELEMENTWISE_BACKWARD_BYTES = (220.6, 8.0)
# The loss, per token and vocabulary entry: eager 44 bytes, compiled 8.
ELEMENTWISE_LOSS_BYTES_PER_LOGIT = 36.0
MEASURED_BYTES = 2  # the activations' bytes per element in the measurement (bf16)

HBM_FRACTION = Efficiency(0.80, True, "torchtitan benchmarks/llama3_h100_202412_torchtitan.md Tables 1, 3: Llama 3.1 "
                                      "8B FSDP 8 / 128 H100, 5,762 / 6,667 and 5,605 / 6,514 tokens/s/GPU without / with "
                                      "torch.compile")


def _layer_width_bytes(arch: Architecture, coefficients: tuple[float, float]) -> float:
    """Bytes per token summed over the decoder layers: the hidden-width and MLP-width terms (a MoE
    layer's routed experts and shared expert count as its MLP width)."""
    per_hidden, per_mlp = coefficients
    dense = arch.dense_intermediate_size or arch.intermediate_size
    moe = arch.experts_per_token * arch.intermediate_size + arch.shared_expert_intermediate_size
    mlp = sum(group.count * (moe if group.moe else dense) for group in layer_groups(arch))
    return per_hidden * arch.hidden_size * arch.num_layers + per_mlp * mlp


def eager_elementwise_bytes_per_token(arch: Architecture, job: Job, plan: Plan) -> float:
    """HBM bytes per token of the whole model that an uncompiled run moves and a compiled one does
    not: the blocks unless `compile` covers them, the loss unless it is compiled too (0 for stacks
    outside EAGER_ELEMENTWISE_STACKS and for fused kernels)."""
    if job.stack not in EAGER_ELEMENTWISE_STACKS or job.kernels != "eager":
        return 0.0
    scale = activation_bytes(plan.precision) / MEASURED_BYTES
    total = 0.0
    if job.compile == "none":
        mode = effective_mode(job, plan)
        reruns = 1.0 if mode == "op" else recomputed_fraction(arch, job, plan) if mode == "full" else 0.0
        forward = _layer_width_bytes(arch, ELEMENTWISE_FORWARD_BYTES)
        total += (1 + reruns) * forward + _layer_width_bytes(arch, ELEMENTWISE_BACKWARD_BYTES)
    if job.compile != "model+loss" and job.loss in ("eager", "chunked"):
        total += ELEMENTWISE_LOSS_BYTES_PER_LOGIT * arch.logits_width
    return scale * total


def eager_elementwise_s(arch: Architecture, job: Job, plan: Plan, gpu: GpuSpec) -> float:
    """Seconds per optimizer step one GPU spends on that traffic: its share of the step's tokens
    (a data-parallel replica's tokens over tp * pp * cp GPUs, as the matmul time) at HBM_FRACTION
    of its HBM bandwidth."""
    per_token = eager_elementwise_bytes_per_token(arch, job, plan)
    if per_token == 0:
        return 0.0
    tokens_per_gpu = plan.micro_batch * plan.grad_accum * job.seq_len / (plan.tp * plan.pp * plan.cp)
    return tokens_per_gpu * per_token / (gpu.hbm_bandwidth_gb_per_s * BYTES_PER_GB * HBM_FRACTION.value)
