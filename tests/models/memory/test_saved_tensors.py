"""Optional: vramplan's activation terms against what PyTorch autograd really saves.

Skipped unless torch and transformers are installed. To run it:

    pip install torch==2.13.0 transformers==5.24.0
    python -m pytest tests/models/memory/test_saved_tensors.py -v

It builds small Hugging Face models from configs (no downloads), runs one training forward pass
under torch.autograd.graph.saved_tensors_hooks (tests/tools/saved_tensors_probe.py) and compares
the unique saved storages per decoder layer, and over the whole model, with vramplan's terms; then
it measures the peak of a full forward + backward with torch's MemTracker and checks that
vramplan's activations pillar bounds it from above without overshooting by more than 35%.
On CPU two things differ from CUDA, where vramplan's terms apply: dropout keeps its mask in the
activation dtype (CUDA: a 1-byte bool mask), and LayerNorm keeps mean/rstd in the input dtype
(CUDA: fp32). The GPT-2 cases convert those two terms; every other term must match exactly.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tools.probe_peak import measured_activation_peak  # noqa: E402
from tools.saved_tensors_probe import probe  # noqa: E402
from transformers import AutoConfig  # noqa: E402

from vramplan.models.catalogue.hf_config import architecture_from_config  # noqa: E402
from vramplan.models.core.setup import Job, Plan  # noqa: E402
from vramplan.models.memory.activation_terms import layer_terms  # noqa: E402
from vramplan.models.memory.activations import activations  # noqa: E402
from vramplan.models.memory.saved_tensors import Shape, Term  # noqa: E402

SMALL = {
    "llama-gqa": ("llama", dict(num_hidden_layers=2, hidden_size=96, num_attention_heads=6, num_key_value_heads=2,
                                head_dim=24, intermediate_size=200, vocab_size=1200)),
    "llama-mha": ("llama", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=4,
                                intermediate_size=176, vocab_size=1000)),
    "mistral": ("mistral", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                intermediate_size=176, vocab_size=1000, sliding_window=None)),
    "qwen2": ("qwen2", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                            intermediate_size=176, vocab_size=1000)),
    "gemma2": ("gemma2", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                              head_dim=32, intermediate_size=176, vocab_size=1000)),
    "mixtral": ("mixtral", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                intermediate_size=176, vocab_size=1000, num_local_experts=4, num_experts_per_tok=2)),
    "gpt2": ("gpt2", dict(n_layer=2, n_embd=64, n_head=4, vocab_size=1000, n_positions=256)),
    "gpt2-nodrop": ("gpt2", dict(n_layer=2, n_embd=64, n_head=4, vocab_size=1000, n_positions=256,
                                 resid_pdrop=0.0, attn_pdrop=0.0, embd_pdrop=0.0)),
}
CASES = [(name, attn) for name in SMALL for attn in ("sdpa", "eager")
         if not (name == "gemma2" and attn == "sdpa")  # transformers 5.24 refuses sdpa for Gemma2
         and not (name == "gpt2" and attn == "sdpa")]  # CPU SDPA with dropout upcasts to fp32 (CPU-only path)
DTYPES = {"bf16": (torch.bfloat16, 2), "fp32": (torch.float32, 4)}


def _arch(name: str):
    model_type, kwargs = SMALL[name]
    config = AutoConfig.for_model(model_type, **kwargs).to_dict()
    return architecture_from_config(config, name=name, source="test")


def _cpu_bytes(term: Term, e: int, t: int, arch) -> int:
    """The term as it is stored on CPU (see the module docstring)."""
    if term.name.endswith("dropout_mask"):
        return term.num_bytes * e
    if term.name.endswith(".stats") and arch.norm_kind == "layernorm":
        return 2 * e * t
    return term.num_bytes


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize(("b", "s"), [(2, 64), (1, 100)])
@pytest.mark.parametrize(("name", "attn"), CASES)
def test_layer_saved_bytes_equal_autograd(name: str, attn: str, b: int, s: int, dtype: str) -> None:
    torch_dtype, e = DTYPES[dtype]
    arch = _arch(name)
    model_type, kwargs = SMALL[name]
    measured = probe(model_type, kwargs, b, s, torch_dtype, attn)
    attention = "flash" if attn == "sdpa" else "eager"
    terms = layer_terms(arch, "eager", attention, Shape(b=b, s=s, e=e))
    expected_layer = sum(_cpu_bytes(t, e, b * s, arch) for t in terms)
    assert measured.layer_bytes(0) == expected_layer
    assert measured.layer_bytes(1) == expected_layer

    # Whole model: embedding + shared RoPE tables + layers + output layer, minus the logits that
    # the model output holds (counted by vramplan, but not a saved tensor).
    precision = "fp32" if dtype == "fp32" else "bf16"
    result = activations(arch, Job(seq_len=s, attention=attention), Plan(gpu="x", micro_batch=b, precision=precision))
    layer_cpu_delta = expected_layer - result.per_layer_bytes
    embedding_cpu_delta = (e - 1) * b * s * arch.hidden_size if arch.embedding_dropout > 0 else 0
    final_norm_cpu_delta = (2 * e - 8) * b * s if arch.norm_kind == "layernorm" else 0
    logits = e * b * s * arch.vocab_size
    expected_total = (result.embedding_bytes + embedding_cpu_delta + result.layers_bytes
                      + arch.num_layers * layer_cpu_delta + result.output_layer_bytes + final_norm_cpu_delta - logits)
    assert measured.total_unique_bytes == expected_total


@pytest.mark.parametrize(("name", "attn"), [c for c in CASES if not c[0].startswith("gpt2")])
def test_gradient_checkpointing_keeps_only_the_layer_input(name: str, attn: str) -> None:
    model_type, kwargs = SMALL[name]
    arch = _arch(name)
    measured = probe(model_type, kwargs, 2, 64, torch.bfloat16, attn, gradient_checkpointing="non_reentrant")
    attention = "flash" if attn == "sdpa" else "eager"
    result = activations(arch, Job(seq_len=64, attention=attention), Plan(gpu="x", micro_batch=2, recompute="full"))
    assert measured.layer_bytes(0) == result.per_layer_bytes == 2 * 2 * 64 * arch.hidden_size


PEAK_CASES = [
    ("llama", dict(num_hidden_layers=4, hidden_size=256, num_attention_heads=8, num_key_value_heads=2,
                   intermediate_size=704, vocab_size=32), 1, 256),
    ("llama", dict(num_hidden_layers=8, hidden_size=256, num_attention_heads=4, num_key_value_heads=2,
                   intermediate_size=688, vocab_size=2000), 2, 256),
    ("qwen2", dict(num_hidden_layers=3, hidden_size=128, num_attention_heads=4, num_key_value_heads=2,
                   intermediate_size=352, vocab_size=64), 2, 128),
    ("mixtral", dict(num_hidden_layers=2, hidden_size=128, num_attention_heads=4, num_key_value_heads=2,
                     intermediate_size=256, vocab_size=64, num_local_experts=4, num_experts_per_tok=2), 2, 128),
]


@pytest.mark.parametrize("checkpointing", [False, True])
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize(("model_type", "kwargs", "b", "s"), PEAK_CASES)
def test_activation_pillar_bounds_measured_peak(model_type, kwargs, b, s, attn, checkpointing) -> None:
    config = AutoConfig.for_model(model_type, **kwargs).to_dict()
    arch = architecture_from_config(config, name="peak", source="test")
    plan = Plan(gpu="x", micro_batch=b, recompute="full" if checkpointing else "none")
    estimate = activations(arch, Job(seq_len=s, attention="flash" if attn == "sdpa" else "eager"), plan).total_bytes
    measured = measured_activation_peak(model_type, kwargs, b, s, attn, checkpointing)
    assert measured <= estimate, "vramplan under-estimates the activation peak"
    assert measured >= 0.65 * estimate, f"over-estimate: measured/estimated = {measured / estimate:.3f}"
