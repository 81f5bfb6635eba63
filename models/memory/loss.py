"""The output layer and the loss: what they keep for backward, what their backward allocates, and
their largest single transient block (the fragmentation reserve is sized from it).

`--loss` (the Job field `loss`):
- "eager": the loss of the `--kernels` implementation (models/memory/activation_terms.py). Hugging Face
  keeps the 16-bit logits in the model output, cross_entropy saves fp32 log-probabilities (4Tv)
  and its backward allocates the fp32 gradients of the log-probabilities and of the upcast logits
  (8Tv): about 14 T v bytes at the backward's peak. Megatron's fused cross entropy writes its
  gradient in place.
- "chunked": torchtune's `CEWithChunkedOutputLoss` (torchtune/modules/loss/ce_chunked_output_loss.py,
  `num_output_chunks = 8`): the decoder's output projection runs on 8 chunks of the sequence
  (`TransformerDecoder.chunked_output`), each chunk is upcast with `.float()` and given to
  `F.cross_entropy`; the recipe deletes the logits before backward (`del logits`,
  recipes/full_finetune_single_device.py). Autograd keeps every chunk's fp32 log-probabilities
  (4Tv in all: `.float()` saves nothing, log_softmax saves its output), and the backward runs one
  chunk at a time: the fp32 gradients of that chunk's log-probabilities and upcast logits plus their
  16-bit cast (2 x 4 + 2) T v / chunks. litgpt's `chunked_cross_entropy` (litgpt/utils.py,
  `lm_head_chunk_size=128`) is modelled the same way (it keeps 16-bit log-probabilities and the
  16-bit logit chunks instead: 4Tv, the same bytes).
- "fused": fused linear cross-entropy that never materialises the logits: Liger-Kernel's
  `LigerFusedLinearCrossEntropyLoss` (src/liger_kernel/ops/fused_linear_cross_entropy.py,
  `fused_linear_cross_entropy_forward`) and Apple's Cut Cross-Entropy. Liger computes the gradient
  of the hidden states during the forward, chunk by chunk of tokens, and keeps it for backward
  (e T h; the lm_head gradient, when it trains, goes into the gradient buffer counted with the
  gradients); a chunk holds `next_power_of_2(ceil(T / ceil(v / h)))` tokens' logits and their
  gradient (16-bit), about 2 e T h at most.

`--compile model+loss` (the Job field `compile`) compiles the eager or chunked loss: torchtitan
`torch.compile(cross_entropy_loss)` (torchtitan/components/loss.py `_maybe_compile`, compile.components
default ["model", "loss"]) and torchtune `training.compile_loss` (torchtune/training/_compile.py:
`CEWithChunkedOutputLoss.compute_cross_entropy` compiled, one call per chunk). Inductor fuses the
`.float()` upcast, log_softmax and nll_loss: the compiled graph saves its 16-bit logits input (eTv;
the same storage Hugging Face's output holds) and two fp32 numbers per token (row max and logsumexp),
never an fp32 T x v tensor, and its backward writes the 16-bit logits gradient in one kernel (eTv,
per chunk for the chunked loss). Measured with torch 2.13 / inductor on CPU
(tests/models/memory/test_compile.py: T = 256, v = 4000 saves 2,048,000 + 2 x 1,024 bytes besides the
targets where eager saves the 4,096,000-byte fp32 log-probabilities; the backward's only T x v buffer is
the bf16 gradient). The fused linear cross-entropy has no logits to compile.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Job
from vramplan.models.core.stack_behaviour import LOSS_PARALLEL_STACKS
from vramplan.models.memory.activation_terms import loss_backward_extra_bytes, output_terms
from vramplan.models.memory.norm_terms import norm_terms
from vramplan.models.memory.saved_tensors import FP32, INT64, Shape, Term


@dataclass(frozen=True)
class LossCost:
    kept: list[Term]  # final norm, lm_head input, the loss's saved tensors
    backward_extra_bytes: int  # what the loss's backward (or fused forward) allocates on top
    largest_transient_bytes: int  # the largest single temporary block


def _next_power_of_two(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def liger_chunk_tokens(arch: Architecture, tokens: int) -> int:
    """Liger's chunk: inc_factor = ceil(V / H), chunk_size = next_power_of_2(ceil(BT / inc_factor))."""
    inc_factor = -(-arch.logits_width // arch.hidden_size)
    return min(tokens, _next_power_of_two(-(-tokens // inc_factor)))


def _targets(x: Shape) -> Term:
    return Term("loss.targets", INT64 * (x.t + 1 if x.b == 1 else x.t))


def compiled_loss(job: Job) -> bool:
    """Whether torch.compile compiles the loss and the loss has logits to fuse (the module docstring)."""
    return job.compile == "model+loss" and job.kernels == "eager" and job.loss in ("eager", "chunked")


def _compiled_loss_cost(arch: Architecture, x: Shape, norm: list[Term], chunks: int) -> LossCost:
    """The compiled cross-entropy: the 16-bit logits (every chunk's) and two fp32 numbers per token
    kept; the backward writes one chunk's 16-bit logits gradient at a time."""
    t, v = x.t, arch.logits_width
    kept = norm + [Term("lm_head.input", x.e * t * arch.hidden_size), Term("loss.logits", x.e * t * v),
                   Term("loss.max_logsumexp_fp32", 2 * FP32 * t), _targets(x)]
    gradient = x.e * -(-t // chunks) * v
    return LossCost(kept, gradient, gradient)


def loss_cost(arch: Architecture, job: Job, x: Shape) -> LossCost:
    t, v, h = x.t, arch.logits_width, arch.hidden_size
    norm = norm_terms(arch, job.kernels, x, "final_norm")
    if compiled_loss(job):
        return _compiled_loss_cost(arch, x, norm, min(job.loss_chunks, t) if job.loss == "chunked" else 1)
    if job.loss == "chunked":
        chunks = min(job.loss_chunks, t)
        kept = norm + [Term("lm_head.input", x.e * t * h), Term("loss.log_probs_fp32", FP32 * t * v), _targets(x)]
        chunk_tokens = -(-t // chunks)
        extra = (2 * FP32 + x.e) * chunk_tokens * v
        return LossCost(kept, extra, FP32 * chunk_tokens * v)
    if job.loss == "fused":
        chunk = liger_chunk_tokens(arch, t)
        kept = norm + [Term("loss.grad_input", x.e * t * h), _targets(x)]
        return LossCost(kept, 2 * x.e * chunk * v, x.e * chunk * v)
    kept = output_terms(arch, job.kernels, x)
    extra = loss_backward_extra_bytes(arch, job.kernels, x) + frozen_head_cast_bytes(arch, job, x)
    largest = FP32 * t * v if job.kernels == "eager" else x.e * t * v  # fp32 logits gradient / in-place cast
    return LossCost(kept, extra, largest)


def frozen_head_cast_bytes(arch: Architecture, job: Job, x: Shape) -> int:
    """The 16-bit copy of an fp32 frozen lm_head that autocast makes for the lm_head's matmul and the
    matmul saves for its input gradient, alive until the lm_head's backward, the first of the
    backward: e v h under PEFT's kbit preparation (qlora_prep peft: the lm_head is cast to fp32,
    huggingface/peft@8bafdb112 src/peft/utils/other.py L135-140) with autocast. Autocast caches a
    cast only for a leaf that requires grad (aten/src/ATen/autocast_mode.cpp `cached_cast`,
    can_try_cache), so a frozen weight's copy is the matmul's own (measured with
    saved_tensors_hooks: tests/models/memory/test_kbit_autocast.py). 0 otherwise, and for the eager
    loss only (one matmul; a chunked loss would cast per chunk, not modelled)."""
    if job.method != "qlora" or job.qlora_prep != "peft" or not x.autocast or job.loss != "eager":
        return 0
    return x.e * arch.logits_width * arch.hidden_size


def loss_parallel_backward_extra_bytes(arch: Architecture, job: Job, x: Shape, logits_deleted: bool = True) -> int | None:
    """The eager loss's backward under torch's loss_parallel, before / tp (None where it does not run).

    torch/distributed/tensor/parallel/loss.py `_nll_loss_and_log_softmax_backward` (read at 02eef6b)
    fuses nll_loss's and log_softmax's backward in Python ops on the local fp32 shard: `grad_input =
    torch.zeros_like(x)`, then `(grad_input + torch.exp(x)) * grad_output`, so beside the saved fp32
    log-probabilities it holds three fp32 T x v buffers at once (the zeros, exp(x) and their sum, or
    the zeros, the sum and the product), where aten's fused log_softmax backward holds two (8Tv,
    loss_backward_extra_bytes). Without pipelining torchtitan deletes the 16-bit logits before the
    backward (`logits_deleted`), which the eager loss keeps (output.logits): the extra is then 3 x 4Tv
    less those eTv; a pipeline stage keeps its output for its backward (torch.distributed.pipelining
    stage.py `fwd_cache`), so under PP all 3 x 4Tv come on top."""
    if job.stack not in LOSS_PARALLEL_STACKS or job.loss != "eager" or job.kernels != "eager" or compiled_loss(job):
        return None
    return (3 * FP32 - (x.e if logits_deleted else 0)) * x.t * arch.logits_width
