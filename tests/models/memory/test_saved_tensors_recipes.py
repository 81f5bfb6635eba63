"""Optional (needs torch + transformers, CI skips it): what autograd really keeps under the chunked
loss, and what torchtitan's per-op SAC policy saves of a real Hugging Face Llama layer, on CPU,
against models/memory/loss.py and models/memory/recompute.py."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch.nn.functional as F  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from vramplan.models.core.catalogue_schema import Architecture  # noqa: E402
from vramplan.models.core.setup import Job  # noqa: E402
from vramplan.models.memory.loss import loss_cost  # noqa: E402
from vramplan.models.memory.recompute import op_sac_saved_bytes  # noqa: E402
from vramplan.models.memory.saved_tensors import Shape  # noqa: E402

H, HEADS, KV, F_WIDTH, V = 64, 4, 2, 176, 1000
TINY = Architecture(name="tiny-llama", model_type="llama", num_layers=1, hidden_size=H, num_attention_heads=HEADS,
                    num_kv_heads=KV, head_dim=H // HEADS, intermediate_size=F_WIDTH, vocab_size=V,
                    max_position_embeddings=4096, tie_word_embeddings=False, learned_position_embeddings=False,
                    qkv_bias=False, linear_bias=False, mlp_kind="swiglu", norm_kind="rmsnorm", norms_per_layer=2,
                    dropout_prob=0.0, num_experts=1, experts_per_token=1, source="test")


def _saved_storage_bytes(run, module) -> int:
    """Bytes of the distinct storages autograd saves while run() builds the graph (parameters and
    their views, e.g. the transposed weight a linear saves, excluded)."""
    storages: dict[int, int] = {}
    weights = {p.untyped_storage().data_ptr() for p in module.parameters()}

    def pack(tensor):
        if tensor.untyped_storage().data_ptr() not in weights:
            storage = tensor.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        run()
    return sum(storages.values())


def test_torchtune_chunked_loss_keeps_fp32_log_probs_of_every_chunk() -> None:
    # CEWithChunkedOutputLoss: output projection per chunk (TransformerDecoder.chunked_output), each
    # chunk upcast with .float() and given to F.cross_entropy(reduction="sum").
    b, s = 1, 256
    hidden = torch.randn(b, s, H, dtype=torch.bfloat16, requires_grad=True)
    lm_head = torch.nn.Linear(H, V, bias=False, dtype=torch.bfloat16)
    labels = torch.randint(0, V, (b, s))

    def run():
        chunks = [lm_head(chunk) for chunk in hidden.tensor_split(8, dim=1)]
        targets = labels.tensor_split(8, dim=1)
        loss = sum(F.cross_entropy(c.reshape(-1, V).float(), t.reshape(-1), reduction="sum")
                   for c, t in zip(chunks, targets))
        loss.backward()

    measured = _saved_storage_bytes(run, lm_head)
    cost = loss_cost(TINY, Job(loss="chunked"), Shape(b=b, s=s, e=2))
    modelled = sum(t.num_bytes for t in cost.kept if not t.name.startswith("final_norm"))
    # modelled: lm_head input 2*T*h + fp32 log-probs 4*T*v + int64 targets (vramplan counts the HF
    # padded labels, T + 1); measured adds 8 fp32 total_weight scalars of nll_loss.
    assert abs(measured - modelled) <= 8 * 4 + 8


class _Ops(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[object, list]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        outs = out if isinstance(out, (tuple, list)) else [out]
        self.ops.append((func, [o for o in outs if isinstance(o, torch.Tensor)]))
        return out


def test_torchtitan_op_sac_policy_on_a_hugging_face_llama_layer() -> None:
    # Replays torchtitan's _op_sac_save_list policy (save SDPA outputs and every other aten.mm) over the
    # ops a real transformers LlamaDecoderLayer runs, and sums what the policy saves.
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import (
        LlamaDecoderLayer,
        LlamaRotaryEmbedding,
    )

    config = LlamaConfig(hidden_size=H, num_attention_heads=HEADS, num_key_value_heads=KV, intermediate_size=F_WIDTH,
                         vocab_size=V, num_hidden_layers=1, attn_implementation="sdpa", torch_dtype=torch.bfloat16)
    config._attn_implementation = "sdpa"
    layer = LlamaDecoderLayer(config, layer_idx=0).to(torch.bfloat16)
    b, s = 2, 64
    x = torch.randn(b, s, H, dtype=torch.bfloat16, requires_grad=True)
    positions = torch.arange(s).unsqueeze(0)
    cos_sin = LlamaRotaryEmbedding(config)(x, positions)
    mode = _Ops()
    with mode:
        layer(x, attention_mask=None, position_ids=positions, position_embeddings=cos_sin)
    sdpa_ops = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
                torch.ops.aten._scaled_dot_product_flash_attention.default,
                torch.ops.aten._scaled_dot_product_efficient_attention.default}
    saved, mm_count = 0, 0
    for func, outs in mode.ops:
        if func == torch.ops.aten.mm.default:
            mm_count += 1
            if mm_count % 2 == 0:
                continue  # torchtitan: "Saves output of all compute ops, except every second mm"
            saved += sum(o.untyped_storage().nbytes() for o in outs)
        elif func in sdpa_ops:
            saved += sum(o.untyped_storage().nbytes() for o in outs[:2])  # output and logsumexp
    assert mm_count == 7  # q, k, v, o, gate, up, down
    saved += x.untyped_storage().nbytes()  # the checkpointed block's input
    assert saved == op_sac_saved_bytes(TINY, Shape(b=b, s=s, e=2))
