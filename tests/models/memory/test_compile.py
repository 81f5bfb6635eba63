"""torch.compile as a recipe switch (Job.compile): what it changes in the loss and in the saved
activations, against saved-tensor measurements of inductor's compiled graphs (torch 2.13, CPU).

The measured numbers come from torchtitan's Llama block (torchtitan/models/llama3/model.py at
e7c0cae: nn.RMSNorm, complex RoPE, SDPA, SwiGLU, K/V repeated to every head by repeat_kv) and its
loss (`cross_entropy(pred.float(), labels)`), bf16, b = 2, s = 64, with
torch.autograd.graph.saved_tensors_hooks counting unique storages (parameters excluded) after one
warm-up step. `test_inductor_saves_what_the_model_says` re-measures them when torch is installed.
"""

from __future__ import annotations

import pytest
from helpers.catalogue import packaged_catalogue

from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.activation_terms import layer_terms
from vramplan.models.memory.activations import activations
from vramplan.models.memory.loss import compiled_loss, loss_cost
from vramplan.models.memory.recompute import op_sac_saved_bytes
from vramplan.models.memory.saved_tensors import Shape

LLAMA = packaged_catalogue().architecture("llama-3.1-8b")
X = Shape(b=2, s=64, e=2)  # T = 128 tokens, bf16


def _block(h: int, a: int, k: int, f: int):
    """A Llama block of these sizes (head_dim = h / a); k = a stands for torchtitan's repeated K/V."""
    return LLAMA.model_copy(update={"hidden_size": h, "num_attention_heads": a, "num_kv_heads": k,
                                    "head_dim": h // a, "intermediate_size": f})


# (h, a, kv heads as saved, f) -> measured bytes per token of the compiled block, no recompute:
# torchtitan's (256, 8, 2 repeated to 8, 512) block saved 922,624 B for 128 tokens, (512, 8, 2 -> 8,
# 512) 1,446,912 B, (256, 4, 4, 512) 920,576 B; eager saved 1,446,912 / 2,364,416 / 1,444,864 B.
COMPILED_BLOCK = [((256, 8, 8, 512), 7208), ((512, 8, 8, 512), 11304), ((256, 4, 4, 512), 7192)]


@pytest.mark.parametrize(("sizes", "per_token"), COMPILED_BLOCK)
def test_a_compiled_block_saves_what_inductor_saved(sizes, per_token) -> None:
    terms = layer_terms(_block(*sizes), "eager", "flash", X, compiled=True)
    assert sum(t.num_bytes for t in terms) == per_token * X.t


def test_compile_drops_the_norms_fp32_copies_and_one_swiglu_tensor() -> None:
    """Hugging Face's layer: T (16h + 4ad + 4kd + 8f + 4a + 8) eager, T (8h + 4ad + 4kd + 6f + 4a + 8) compiled."""
    h, f, t = LLAMA.hidden_size, LLAMA.intermediate_size, X.t
    eager = sum(term.num_bytes for term in layer_terms(LLAMA, "eager", "flash", X))
    compiled = sum(term.num_bytes for term in layer_terms(LLAMA, "eager", "flash", X, compiled=True))
    assert eager - compiled == t * (8 * h + 2 * f)
    # fused kernels (Megatron, Unsloth) have nothing left to fuse; autocast was not measured
    assert layer_terms(LLAMA, "fused", "flash", X, compiled=True) == layer_terms(LLAMA, "fused", "flash", X)
    autocast = Shape(b=2, s=64, e=2, autocast=True)
    assert layer_terms(LLAMA, "eager", "flash", autocast, compiled=True) == layer_terms(LLAMA, "eager", "flash", autocast)


def test_compiled_op_sac_keeps_no_output_the_backward_does_not_read() -> None:
    """torchtitan's op SAC on the (256, 8 heads, 2 kv heads, 512) block, compiled: the block input,
    wq, wv and w1 outputs, the SDPA output and logsumexp: 348,160 B for 128 tokens (measured); eager
    SAC caches w2's output too (65,536 B more)."""
    block = _block(256, 8, 2, 512)
    assert op_sac_saved_bytes(block, X, compiled=True) == 348_160
    assert op_sac_saved_bytes(block, X) - op_sac_saved_bytes(block, X, compiled=True) == X.e * X.t * 256


def test_a_compiled_loss_keeps_the_16_bit_logits_and_two_floats_per_token() -> None:
    """cross_entropy(pred.float()) on T = 256 bf16 logits of v = 4000: eager saves the 4,096,000-byte
    fp32 log-probabilities, compiled the 2,048,000-byte logits and two 1,024-byte fp32 columns (row
    max, logsumexp); the compiled backward's only T x v buffer is the bf16 gradient (measured)."""
    arch = LLAMA.model_copy(update={"vocab_size": 4000})
    x = Shape(b=2, s=128, e=2)
    eager = loss_cost(arch, Job(stack="torchtitan"), x)
    compiled = loss_cost(arch, Job(stack="torchtitan", compile="model+loss"), x)
    kept = {t.name: t.num_bytes for t in compiled.kept}
    assert kept["loss.logits"] == 2_048_000 and kept["loss.max_logsumexp_fp32"] == 2 * 1024
    assert {t.name: t.num_bytes for t in eager.kept}["loss.log_probs_fp32"] == 4_096_000
    assert compiled.backward_extra_bytes == compiled.largest_transient_bytes == 2_048_000
    assert eager.backward_extra_bytes == 2 * 4_096_000


def test_the_chunked_loss_compiles_one_chunk_at_a_time() -> None:
    """torchtune compiles CEWithChunkedOutputLoss.compute_cross_entropy: every chunk's 16-bit logits
    are kept, the backward writes one chunk's gradient at a time."""
    x = Shape(b=2, s=2048, e=2)
    job = Job(stack="torchtune", loss="chunked", compile=True)
    cost = loss_cost(LLAMA, job, x)
    t, v = x.t, LLAMA.vocab_size
    assert {term.name: term.num_bytes for term in cost.kept}["loss.logits"] == 2 * t * v
    assert cost.backward_extra_bytes == 2 * (t // 8) * v
    assert not compiled_loss(job.model_copy(update={"compile": "model"}))  # the blocks only
    assert not compiled_loss(job.model_copy(update={"loss": "fused"}))  # no logits to compile


def test_compile_lowers_torchtitans_published_peak_by_what_it_saved() -> None:
    """torchtitan's benchmark (llama3_h100_202412_torchtitan.md Table 1): Llama 3.1 8B, FSDP 8, local
    batch 2, seq 8192, op SAC: 82.4 GiB eager, 77.0 GiB with the blocks compiled (the loss was not
    compiled at 9dec370): 5.4 GiB less. The estimate drops w2's output per layer: 32 x 128 MiB."""
    job = Job(stack="torchtitan", selective="op", seq_len=8192, fragmentation_fraction=0)
    plan = Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=3, micro_batch=2, recompute="selective")
    eager = activations(LLAMA, job, plan).total_bytes
    blocks = activations(LLAMA, job.model_copy(update={"compile": "model"}), plan).total_bytes
    assert eager - blocks == 32 * 2 * 16384 * 4096  # 4.0 GiB of the measured 5.4
    whole = activations(LLAMA, job.model_copy(update={"compile": "model+loss"}), plan).total_bytes
    t, v = 16384, LLAMA.vocab_size
    # kept: the bf16 logits and two fp32 per token instead of the logits, the fp32 log-probs and
    # nll_loss's 4-byte total weight; backward: the bf16 gradient instead of two fp32 ones
    assert blocks - whole == (4 * t * v + 4 - 8 * t) + (8 * t * v - 2 * t * v)


@pytest.mark.slow
def test_inductor_saves_what_the_model_says() -> None:
    """Re-measure the compiled loss and the compiled block with torch (skipped without it)."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F
    from torch import nn

    def saved(fn, params=()):
        ids = {p.untyped_storage().data_ptr() for p in params}
        seen = {}

        def pack(t):
            if t.untyped_storage().data_ptr() not in ids:
                seen.setdefault(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
            return t
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = fn()
        out.sum().backward()
        return sum(seen.values())

    def ce(pred, labels):
        return F.cross_entropy(pred.float(), labels, reduction="sum")

    compiled_ce = torch.compile(ce)
    labels = torch.randint(0, 4000, (256,))
    for _ in range(2):  # the first call compiles
        pred = torch.randn(256, 4000, dtype=torch.bfloat16, requires_grad=True)
        measured = saved(lambda pred=pred: compiled_ce(pred, labels))
    assert measured == 2_048_000 + 2 * 1024 + 8 * 256  # logits, max, logsumexp, int64 targets

    class Block(nn.Module):  # torchtitan's Llama block, 4 heads, no GQA
        def __init__(self, h=256, a=4, f=512):
            super().__init__()
            self.a, self.d = a, h // a
            self.wq, self.wk, self.wv, self.wo = (nn.Linear(h, h, bias=False) for _ in range(4))
            self.w1, self.w3 = nn.Linear(h, f, bias=False), nn.Linear(h, f, bias=False)
            self.w2 = nn.Linear(f, h, bias=False)
            self.n1, self.n2 = nn.RMSNorm(h, eps=1e-5), nn.RMSNorm(h, eps=1e-5)

        def forward(self, x, fc):
            b, s, _ = x.shape
            y = self.n1(x)
            q, k, v = (w(y).view(b, s, self.a, self.d) for w in (self.wq, self.wk, self.wv))
            q, k = (torch.view_as_real(torch.view_as_complex(t.float().reshape(b, s, self.a, -1, 2)) * fc)
                    .flatten(3).type_as(t) for t in (q, k))
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
            hid = x + self.wo(o.transpose(1, 2).contiguous().view(b, s, -1))
            z = self.n2(hid)
            return hid + self.w2(F.silu(self.w1(z)) * self.w3(z))

    block = Block().to(torch.bfloat16)
    freqs = 1.0 / (10000 ** (torch.arange(0, 64, 2).float() / 64))
    fc = torch.polar(torch.ones(64, 32), torch.outer(torch.arange(64).float(), freqs)).view(1, 64, 1, 32)
    compiled_block = torch.compile(block, fullgraph=True)
    x = torch.randn(2, 64, 256, dtype=torch.bfloat16, requires_grad=True)
    saved(lambda: compiled_block(x, fc), list(block.parameters()) + [fc])
    assert saved(lambda: compiled_block(x, fc), list(block.parameters()) + [fc]) == 7192 * 128
