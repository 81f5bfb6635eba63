"""Exact parameter counts of the catalogue models, taken from Hugging Face transformers itself.

Run with torch and transformers installed (transformers 5.24.0, torch 2.13.0 CPU):

    python tests/tools/hf_param_counts.py            # print the dict literal
    python tests/tools/hf_param_counts.py --check    # compare with tests/golden_params.py

For every row of catalogues/architectures.csv the script builds the transformers config
(tests/fixtures/hf_configs/<name>.json; the decoder's `text_config` for multimodal checkpoints,
Gemma 3 and Llama 4, and beside it, for Gemma 3, whose Auto class loads its vision tower, that tower
and projector counted in the whole Gemma3ForConditionalGeneration; for gpt3-175b, which is not on the hub,
a GPT2Config built from the catalogue row), instantiates ``AutoModelForCausalLM.from_config`` on
the meta device (no memory is allocated, so 671B costs nothing) and counts parameters:

* ``total``      -- ``sum(p.numel() for p in model.parameters())``; a tied embedding / lm_head
                    is one Parameter and so is counted once.
* ``embedding``  -- token embedding + learned position embedding (GPT-2 ``wpe``), if any.
* ``per_layer``  -- parameters of decoder layer 0.
* ``layers``     -- parameters of all decoder layers (layers differ in MoE models with dense layers).
* ``final_norm`` -- the norm after the last layer (``norm`` / ``ln_f`` / ``final_layer_norm``).
* ``lm_head``    -- the output projection; 0 when it is tied to the token embedding.
* ``active``     -- parameters used per token: total minus, in every MoE layer, the routed-expert
                    parameters of the (num_experts - experts_per_token) experts a token skips, and
                    minus a vision tower.
* ``vision``     -- (Gemma 3 only) the whole model's parameters outside its language model, which
                    ``total`` includes.

It also checks that the catalogue row equals what vramplan's own mapping (models/catalogue/hf_config.py)
reads from the fixture, so the CSV and the fixtures cannot drift apart silently, and exits 1 on
any mismatch.
"""

from __future__ import annotations

import argparse
import csv
import io
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
TEXT_CONFIG_TYPES = {"gemma3", "llama4"}
TOWER_TYPES = {"gemma3"}  # AutoModelForCausalLM builds Gemma3ForConditionalGeneration; llama4's is text-only


def vision_params(row: dict[str, str]) -> int:
    """Parameters of the whole multimodal model outside its language model (0 without a tower)."""
    fixture = FIXTURES / f"{row['name']}.json"
    data = json.loads(fixture.read_text()) if fixture.exists() else {}
    if data.get("model_type") not in TOWER_TYPES:
        return 0
    model_type = data.pop("model_type")
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **data))
    return sum(p.numel() for name, p in model.named_parameters() if ".language_model." not in f".{name}")


def load_rows() -> list[dict[str, str]]:
    with CATALOGUE.open(newline="") as handle:
        return list(csv.DictReader(handle))


def config_for(row: dict[str, str]):
    """The transformers config of a catalogue row: the hub config.json fixture, or GPT-3 from its row."""
    fixture = FIXTURES / f"{row['name']}.json"
    if fixture.exists():
        data = json.loads(fixture.read_text())
        if data["model_type"] in TEXT_CONFIG_TYPES:  # the decoder of a multimodal checkpoint
            data = dict(data["text_config"])
        model_type = data.pop("model_type")
        return AutoConfig.for_model(model_type, **data)
    if row["name"] != "gpt3-175b":
        raise FileNotFoundError(f"no config fixture for {row['name']}: {fixture}")
    hidden, dropout = int(row["hidden_size"]), float(row["dropout_prob"])
    return GPT2Config(  # GPT-3 175B (Brown et al. 2020, Table 2.1) in the GPT-2 module layout
        vocab_size=int(row["vocab_size"]), n_positions=int(row["max_position_embeddings"]), n_embd=hidden,
        n_layer=int(row["num_layers"]), n_head=int(row["num_attention_heads"]), n_inner=int(row["intermediate_size"]),
        activation_function="gelu_new", resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout,
        layer_norm_epsilon=1e-5, tie_word_embeddings=True,
    )


def _numel(module: torch.nn.Module | None) -> int:
    return 0 if module is None else sum(p.numel() for p in module.parameters())


def _decoder_parts(model: torch.nn.Module):
    base = next(getattr(model, n) for n in ("model", "transformer", "gpt_neox") if hasattr(model, n))
    layers = base.layers if hasattr(base, "layers") else base.h
    final_norm = next(getattr(base, n) for n in ("norm", "ln_f", "final_layer_norm") if hasattr(base, n))
    return layers, final_norm, getattr(base, "wpe", None)


def _experts(layer: torch.nn.Module) -> torch.nn.Module | None:
    return next((m for name, m in layer.named_modules() if name.split(".")[-1] == "experts"), None)


def count(row: dict[str, str]) -> tuple[dict[str, int], list[str]]:
    config = config_for(row)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    layers, final_norm, position = _decoder_parts(model)
    token_embedding, output = model.get_input_embeddings(), model.get_output_embeddings()
    tied = output is not None and output.weight is token_embedding.weight
    total = sum(p.numel() for p in model.parameters())
    sizes = [_numel(layer) for layer in layers]
    counts = {
        "total": total, "embedding": _numel(token_embedding) + _numel(position), "per_layer": sizes[0],
        "layers": sum(sizes), "final_norm": _numel(final_norm), "lm_head": 0 if tied else _numel(output),
    }
    problems = []
    name = row["name"]
    if total != counts["embedding"] + counts["layers"] + counts["final_norm"] + counts["lm_head"]:
        problems.append(f"{name}: total {total} is not embedding + layers + final norm + lm_head")
    experts, top_k = int(row["num_experts"]), int(row["experts_per_token"])
    inactive = 0
    for layer in layers:
        module = _experts(layer)
        if module is None:
            continue
        routed = _numel(module)
        if routed % experts:
            problems.append(f"{name}: expert parameters {routed} do not split over {experts} experts")
        inactive += (experts - top_k) * (routed // experts)
    if experts > 1 and not inactive and top_k < experts:
        problems.append(f"{name}: CSV says {experts} experts but the model has none")
    counts["active"] = total - inactive
    vision = vision_params(row)
    if vision:
        counts["total"] += vision
        counts["vision"] = vision
    return counts, problems + cross_check(row)


def cross_check(row: dict[str, str]) -> list[str]:
    """The catalogue row must equal vramplan's reading of the fixture (models/catalogue/hf_config.py)."""
    sys.path.insert(0, str(ROOT.parent))
    from vramplan.models.catalogue.catalogue import parse_rows
    from vramplan.models.catalogue.hf_config import architecture_from_config_file
    from vramplan.models.core.catalogue_schema import Architecture

    fixture = FIXTURES / f"{row['name']}.json"
    if not fixture.exists():
        return []
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(row))
    writer.writeheader()
    writer.writerow(row)
    from_csv = parse_rows(text.getvalue(), Architecture, "row", "models_csv")[0]
    from_fixture = architecture_from_config_file(fixture)
    a, b = from_csv.model_dump(exclude={"name", "source"}), from_fixture.model_dump(exclude={"name", "source"})
    return [f"{row['name']}: {k} is {a[k]!r} in the CSV but {b[k]!r} in the fixture" for k in a if a[k] != b[k]]


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
