"""What the stack's fused attention kernel saves against the FlashAttention-2-class speed the
compute efficiency is calibrated on (catalogues/stacks.csv `attention_kernel`).

The compute model (models/time/performance.py) times the attention scores and values, full-square
FLOPs (models/time/flops.py), at the generation's calibrated efficiency, like the matmuls. That speed
is the one of a FlashAttention-2-class kernel: torch SDPA's flash backend in torchtitan's Llama 3.1
8B runs, which read 1.04-1.10 with attention at 20% (seq 8192) to 75% (seq 65536, CP 2) of their
compute (docs/fidelity.md, tests/data/measured_throughput.csv), i.e. with no attention-share trend.

`cudnn`: Megatron-Core's TEDotProductAttention runs Transformer Engine's DotProductAttention, which
prefers its FusedAttention (cuDNN) backend over FlashAttention on compute capability 9.0 and above
(NVIDIA/TransformerEngine transformer_engine/pytorch/attention/dot_product_attention/utils.py @
002a3e57, get_attention_backend: "Select FusedAttention for performance"). The FlashAttention-3
paper (Shah et al., arXiv:2407.08608) benchmarks both kernels on one H100 80GB SXM5, bf16, head dim
128, sequence 8k (its Figs. 5 and 6): cuDNN runs the causal forward at 529 TFLOPS against
FlashAttention-2's 333, the backward at 518 against 318. The attention's forward FLOPs (once, and
again where recompute re-runs them) take FLASH2 / CUDNN of their time, its backward FLOPs (twice the
forward's) likewise; nothing is fitted to training runs. Head dim 128 is every dense model of the
evidence's; the paper's head dim 64 forward gains less (1.28x), which this does not model. The
speed-up applies on generations where Transformer Engine selects cuDNN (CUDNN_GENERATIONS); on
older ones it runs FlashAttention-2, the calibrated speed.
"""

from __future__ import annotations

from vramplan.models.catalogue.catalogue import load_stacks
from vramplan.models.catalogue.stack import AttentionKernel
from vramplan.models.core.catalogue_schema import Architecture, GpuSpec
from vramplan.models.core.setup import Job, Plan
from vramplan.models.time.flops import forward_flops_per_token, indexer_forward_flops, plan_flops_per_token

# FlashAttention-3 paper (arXiv:2407.08608) Fig. 5, "Attention forward speed, head dim 128 (H100 80GB
# SXM5)", causal, seq 8k: FlashAttention-2 333, cuDNN 529 TFLOPS.
FLASH2_FORWARD_TFLOPS = 333.0
CUDNN_FORWARD_TFLOPS = 529.0
# Same paper, Fig. 6, "Attention backward speed, head dim 128 (H100 80GB SXM5)", seq 8k:
# FlashAttention-2 318, cuDNN 518 TFLOPS.
FLASH2_BACKWARD_TFLOPS = 318.0
CUDNN_BACKWARD_TFLOPS = 518.0

# Generations at compute capability 9.0 and above (Hopper sm90, Blackwell sm100): where Transformer
# Engine's get_attention_backend prefers FusedAttention (`device_compute_capability >= (9, 0)`).
CUDNN_GENERATIONS = frozenset({"hopper", "blackwell"})


def attention_kernel(job: Job) -> AttentionKernel:
    """The fused attention kernel the job's stack runs (catalogues/stacks.csv `attention_kernel`)."""
    return load_stacks()[job.stack].attention_kernel


def runs_cudnn(job: Job, gpu: GpuSpec) -> bool:
    """cuDNN's fused attention: the stack's kernel, a fused attention (not eager scores) and a GPU
    where Transformer Engine selects it."""
    return job.attention == "flash" and attention_kernel(job) == "cudnn" and gpu.architecture in CUDNN_GENERATIONS


def attention_flops_per_token(arch: Architecture, job: Job, plan: Plan) -> tuple[float, float]:
    """(forward, backward) attention FLOPs per token the GPU executes: the forward once plus what
    recompute re-runs, the backward twice the forward's. Read off the plan's FlopsPerToken: its
    hardware FLOPs less the linears' (recompute included) and the logits' passes."""
    flops = plan_flops_per_token(arch, job, plan)
    layers, attention, logits = forward_flops_per_token(arch, job.seq_len)
    indexer, _ = indexer_forward_flops(arch, job.seq_len)  # a DeepSeek Sparse Attention indexer: forward only
    passes = (flops.model - indexer - 3 * attention) / (layers + logits)  # 3 for full training, 2 for LoRA (flops.py)
    executed = flops.hardware - flops.indexer - flops.linear - passes * logits  # 3 x attention + its recomputed forward
    return executed - 2 * attention, 2 * attention


def attention_saved_flops_per_token(arch: Architecture, job: Job, plan: Plan, gpu: GpuSpec) -> float:
    """Attention FLOPs per token, in the compute model's units (FLOPs at the calibrated efficiency),
    that the stack's kernel saves against FlashAttention-2: 0 unless it runs cuDNN."""
    if not runs_cudnn(job, gpu):
        return 0.0
    forward, backward = attention_flops_per_token(arch, job, plan)
    return (forward * (1 - FLASH2_FORWARD_TFLOPS / CUDNN_FORWARD_TFLOPS)
            + backward * (1 - FLASH2_BACKWARD_TFLOPS / CUDNN_BACKWARD_TFLOPS))
