"""Exact parameter counts of the catalogue models, taken from Hugging Face transformers itself.

Run with the torch/transformers environment (not the project's own venv):

    /work/venv-torch/bin/python tests/tools/hf_param_counts.py            # print the dict literal
    /work/venv-torch/bin/python tests/tools/hf_param_counts.py --check    # compare with tests/golden_params.py

For every row of catalogues/architectures.csv the script builds the transformers config
(tests/fixtures/hf_configs/<name>.json; for gpt3-175b, which is not on the hub, a GPT2Config
built from the catalogue row), instantiates ``AutoModelForCausalLM.from_config`` on the meta
device (no memory is allocated, so the 405B model costs nothing) and counts parameters:

* ``total``      -- ``sum(p.numel() for p in model.parameters())``; a tied embedding / lm_head
                    is one Parameter and so is counted once.
* ``embedding``  -- token embedding + learned position embedding (GPT-2 ``wpe``), if any.
* ``per_layer``  -- parameters of decoder layer 0 (the script checks every layer has as many).
* ``final_norm`` -- the norm after the last layer (``norm`` / ``ln_f``), weight and bias.
* ``lm_head``    -- the output projection; 0 when it is tied to the token embedding.
* ``active``     -- parameters used per token: total minus, in every layer, the MLP parameters
                    of the (num_experts - experts_per_token) experts a token does not visit.
                    Equal to ``total`` for dense models.

It also cross-checks the catalogue row against the built config and model (layers, widths,
heads, head_dim, vocab, positions, tying, biases, norms per layer, experts) and exits with
status 1 on any mismatch, so the CSV and the fixtures cannot drift apart silently.
"""

from __future__ import annotations

import argparse
import csv
import json
import pprint
import sys
from pathlib import Path

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, GPT2Config

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE = ROOT / "catalogues" / "architectures.csv"
FIXTURES = ROOT / "tests" / "fixtures" / "hf_configs"

KEYS = ("total", "embedding", "per_layer", "final_norm", "lm_head", "active")


def _bool(text: str) -> bool:
    if text not in ("true", "false"):
        raise ValueError(f"not a CSV boolean: {text!r}")
    return text == "true"


def load_rows() -> list[dict[str, str]]:
    with CATALOGUE.open(newline="") as handle:
        return list(csv.DictReader(handle))


def config_for(row: dict[str, str]):
    """The transformers config of a catalogue row: the hub config.json fixture, or GPT-3 from its row."""
    fixture = FIXTURES / f"{row['name']}.json"
    if fixture.exists():
        data = json.loads(fixture.read_text())
        model_type = data.pop("model_type")
        return AutoConfig.for_model(model_type, **data)
    if row["name"] != "gpt3-175b":
        raise FileNotFoundError(f"no config fixture for {row['name']}: {fixture}")
    # GPT-3 175B (Brown et al. 2020, Table 2.1) in the GPT-2 module layout.
    hidden = int(row["hidden_size"])
    dropout = float(row["dropout_prob"])
    return GPT2Config(
        vocab_size=int(row["vocab_size"]),
        n_positions=int(row["max_position_embeddings"]),
        n_embd=hidden,
        n_layer=int(row["num_layers"]),
        n_head=int(row["num_attention_heads"]),
        n_inner=int(row["intermediate_size"]),
        activation_function="gelu_new",
        resid_pdrop=dropout,
        embd_pdrop=dropout,
        attn_pdrop=dropout,
        layer_norm_epsilon=1e-5,
        tie_word_embeddings=True,
    )


def _numel(module: torch.nn.Module | None) -> int:
    if module is None:
        return 0
    return sum(p.numel() for p in module.parameters())


def _decoder_parts(model: torch.nn.Module):
    base = model.base_model  # LlamaModel / GPT2Model / ...
    if hasattr(base, "layers"):
        layers, final_norm, position = base.layers, base.norm, None
    else:  # GPT-2 layout
        layers, final_norm, position = base.h, base.ln_f, base.wpe
    return base, layers, final_norm, position


def _experts(layer: torch.nn.Module) -> torch.nn.Module | None:
    for name, module in layer.named_modules():
        if name.split(".")[-1] == "experts":
            return module
    return None


def _has_bias(linear: torch.nn.Module | None) -> bool:
    return linear is not None and getattr(linear, "bias", None) is not None


def _layer_structure(model_type: str, layer: torch.nn.Module) -> dict[str, object]:
    """Biases and norms of one decoder layer, read off the built modules."""
    norms = sum(1 for m in layer.modules() if "norm" in type(m).__name__.lower())
    if model_type == "gpt2":
        qkv_bias = _has_bias(layer.attn.c_attn)
        linear_bias = _has_bias(layer.attn.c_proj) and _has_bias(layer.mlp.c_fc) and _has_bias(layer.mlp.c_proj)
    else:
        attn = layer.self_attn
        qkv_bias = _has_bias(attn.q_proj) and _has_bias(attn.k_proj) and _has_bias(attn.v_proj)
        mlp_biases = [
            getattr(m, "bias", None) is not None
            for m in layer.mlp.modules()
            if isinstance(m, torch.nn.Linear)
        ]
        linear_bias = _has_bias(attn.o_proj) or any(mlp_biases)
    return {"qkv_bias": qkv_bias, "linear_bias": linear_bias, "norms_per_layer": norms}


def count(row: dict[str, str]) -> tuple[dict[str, int], list[str]]:
    config = config_for(row)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    base, layers, final_norm, position = _decoder_parts(model)
    token_embedding = model.get_input_embeddings()
    output = model.get_output_embeddings()
    tied = output is not None and output.weight is token_embedding.weight

    total = sum(p.numel() for p in model.parameters())
    per_layer_all = [_numel(layer) for layer in layers]
    per_layer = per_layer_all[0]
    embedding = _numel(token_embedding) + _numel(position)
    final = _numel(final_norm)
    lm_head = 0 if tied else _numel(output)

    problems: list[str] = []
    name = row["name"]
    if any(n != per_layer for n in per_layer_all):
        problems.append(f"{name}: decoder layers differ in size: {sorted(set(per_layer_all))}")
    if total != embedding + len(layers) * per_layer + final + lm_head:
        problems.append(f"{name}: total {total} is not embedding + layers + final norm + lm_head")

    num_experts = int(row["num_experts"])
    experts_per_token = int(row["experts_per_token"])
    active = total
    experts = _experts(layers[0])
    if experts is not None:
        expert_params = _numel(experts)
        cfg_experts = getattr(config, "num_local_experts", None)
        if cfg_experts != num_experts or getattr(config, "num_experts_per_tok", None) != experts_per_token:
            problems.append(f"{name}: experts {cfg_experts}/{config.num_experts_per_tok} != CSV {num_experts}/{experts_per_token}")
        if expert_params % num_experts:
            problems.append(f"{name}: expert parameters {expert_params} do not split over {num_experts} experts")
        per_expert = expert_params // num_experts
        active = total - len(layers) * (num_experts - experts_per_token) * per_expert
    elif num_experts != 1:
        problems.append(f"{name}: CSV says {num_experts} experts but the model has none")

    problems += cross_check(row, config, model, layers, tied)
    counts = {
        "total": total,
        "embedding": embedding,
        "per_layer": per_layer,
        "final_norm": final,
        "lm_head": lm_head,
        "active": active,
    }
    return counts, problems


def cross_check(row, config, model, layers, tied) -> list[str]:
    """Compare the catalogue row with what transformers built from the config."""
    model_type = config.model_type
    heads = config.num_attention_heads
    hidden = config.hidden_size
    if model_type == "gpt2":
        intermediate = config.n_inner or 4 * hidden
        kv_heads = heads
        head_dim = hidden // heads
        dropout = config.resid_pdrop
        if not (config.resid_pdrop == config.embd_pdrop == config.attn_pdrop):
            return [f"{row['name']}: GPT-2 dropouts differ"]
    else:
        intermediate = config.intermediate_size
        kv_heads = getattr(config, "num_key_value_heads", None) or heads
        head_dim = getattr(config, "head_dim", None) or hidden // heads
        dropout = getattr(config, "attention_dropout", 0.0)
    expected = {
        "model_type": model_type,
        "num_layers": config.num_hidden_layers,
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_kv_heads": kv_heads,
        "head_dim": head_dim,
        "intermediate_size": intermediate,
        "vocab_size": config.vocab_size,
        "max_position_embeddings": config.max_position_embeddings,
        "tie_word_embeddings": tied,
        "learned_position_embeddings": model_type == "gpt2",
        "dropout_prob": float(dropout),
        "final_logit_softcapping": getattr(config, "final_logit_softcapping", None),
        **_layer_structure(model_type, layers[0]),
    }
    actual = {
        "model_type": row["model_type"],
        "num_layers": int(row["num_layers"]),
        "hidden_size": int(row["hidden_size"]),
        "num_attention_heads": int(row["num_attention_heads"]),
        "num_kv_heads": int(row["num_kv_heads"]),
        "head_dim": int(row["head_dim"]),
        "intermediate_size": int(row["intermediate_size"]),
        "vocab_size": int(row["vocab_size"]),
        "max_position_embeddings": int(row["max_position_embeddings"]),
        "tie_word_embeddings": _bool(row["tie_word_embeddings"]),
        "learned_position_embeddings": _bool(row["learned_position_embeddings"]),
        "dropout_prob": float(row["dropout_prob"]),
        "final_logit_softcapping": float(row["final_logit_softcapping"]) if row["final_logit_softcapping"] else None,
        "qkv_bias": _bool(row["qkv_bias"]),
        "linear_bias": _bool(row["linear_bias"]),
        "norms_per_layer": int(row["norms_per_layer"]),
    }
    return [
        f"{row['name']}: {key} is {actual[key]!r} in the CSV but {expected[key]!r} in transformers"
        for key in expected
        if expected[key] != actual[key]
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with tests/golden_params.py")
    args = parser.parse_args()

    results: dict[str, dict[str, int]] = {}
    problems: list[str] = []
    for row in load_rows():
        counts, row_problems = count(row)
        results[row["name"]] = counts
        problems += row_problems

    print(f"# transformers {transformers.__version__}, torch {torch.__version__}", file=sys.stderr)
    print(pprint.pformat(results, sort_dicts=False, width=100))

    if args.check:
        sys.path.insert(0, str(ROOT))
        from tests.golden_params import HF_PARAM_COUNTS

        if HF_PARAM_COUNTS != results:
            problems.append("tests/golden_params.py differs from the counts above")
    for problem in problems:
        print("MISMATCH:", problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
