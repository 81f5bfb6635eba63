"""CPU stand-ins for the two CUDA kernels transformers' Gated DeltaNet layers call when they are
installed (modeling_qwen3_next.py / modeling_qwen3_5.py / modeling_qwen3_5_moe.py: the functions
decorated use_kernel_func_from_hub_with_fallback pick flash-linear-attention and causal-conv1d before
their reference PyTorch code). Neither runs on a CPU, so the saved-tensor probe runs these instead:
the forward value from transformers' own reference code under no_grad, and for backward exactly the
tensors the kernels' autograd functions save (the backward returns zeros: the probe reads only what
is saved):

- flash-linear-attention fla/ops/gated_delta_rule/chunk.py ChunkGatedDeltaRuleFunction.forward:
  input_guard makes q, k, v contiguous; l2norm_fwd returns the normalised q and k (input dtype) and
  their fp32 rstd per head; chunk_local_cumsum the fp32 decay g; solve_tril the chunk system A in k's
  dtype, [B, T, H, 64]; `ctx.save_for_backward(q, q_rstd, k, k_rstd, v, g, beta, A, initial_state, ...)`.
- causal-conv1d causal_conv1d/causal_conv1d_interface.py CausalConv1dFn.forward: x (contiguous only
  when neither of its last two dims is), `ctx.save_for_backward(x, weight, bias, seq_idx, initial_states)`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

CHUNK = 64  # fla's chunk_size


class _ChunkGatedDeltaRule(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, g, beta, reference):
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        with torch.no_grad():
            q_rstd = torch.rsqrt((q.float() ** 2).sum(-1) + 1e-6)
            k_rstd = torch.rsqrt((k.float() ** 2).sum(-1) + 1e-6)
            q_normed = (q.float() * q_rstd.unsqueeze(-1)).to(q.dtype)
            k_normed = (k.float() * k_rstd.unsqueeze(-1)).to(k.dtype)
            batch, tokens, heads = g.shape
            decay = g.float().cumsum(1)
            chunk_system = torch.zeros(batch, tokens, heads, CHUNK, dtype=k.dtype)
            out, _ = reference(q, k, v, g=g, beta=beta, use_qk_l2norm_in_kernel=True)
        ctx.save_for_backward(q_normed, q_rstd, k_normed, k_rstd, v, decay, beta, chunk_system)
        return out.to(q.dtype)

    @staticmethod
    def backward(ctx, grad):
        q, _, k, _, v, g, beta, _ = ctx.saved_tensors
        return torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v), torch.zeros_like(g), torch.zeros_like(beta), None


class _CausalConv1d(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight):
        if x.stride(2) != 1 and x.stride(1) != 1:
            x = x.contiguous()
        with torch.no_grad():
            out = F.conv1d(x, weight.unsqueeze(1), padding=weight.shape[-1] - 1, groups=x.shape[1])[..., :x.shape[-1]]
            out = F.silu(out).to(x.dtype)
        ctx.save_for_backward(x, weight)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        return torch.zeros_like(x), torch.zeros_like(weight)


def install(modeling) -> None:
    """Replace the reference chunked rule and convolution of one transformers modeling module."""
    reference = modeling.torch_chunk_gated_delta_rule

    def chunk_gated_delta_rule(query, key, value, g, beta, **kwargs):
        return _ChunkGatedDeltaRule.apply(query, key, value, g, beta, reference), None

    def causal_conv1d_fn(hidden_states, weight, bias=None, activation=None, **kwargs):
        return _CausalConv1d.apply(hidden_states, weight)

    modeling.torch_chunk_gated_delta_rule = chunk_gated_delta_rule
    modeling.causal_conv1d_fn = causal_conv1d_fn
