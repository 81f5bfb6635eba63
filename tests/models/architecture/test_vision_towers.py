"""A multimodal checkpoint's vision tower and projector (models/catalogue/hf_vision.py): counted exactly,
held with the embedding on the first stage, trained in full fine-tuning, frozen under LoRA, and never
on a text token's path (no FLOPs, not active)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from helpers.catalogue import packaged_catalogue

from vramplan.models.architecture.lora import trainable_params
from vramplan.models.architecture.params import count_params
from vramplan.models.catalogue.hf_config import architecture_from_config
from vramplan.models.catalogue.hf_vision import vision_params
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.memory import memory_per_gpu, stage_memory
from vramplan.models.time.flops import plan_flops_per_token

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hf_configs"
GEMMA3 = json.loads((FIXTURES / "gemma-3-27b.json").read_text())
MISTRAL3 = json.loads((FIXTURES / "mistral-small-3.1-24b.json").read_text())
GEMMA3_NO_TOWER = {k: v for k, v in GEMMA3.items() if k != "vision_config"}
MISTRAL3_NO_TOWER = {k: v for k, v in MISTRAL3.items() if k != "vision_config"}

# The whole model's parameters outside model.language_model, transformers 5.24.0 / torch 2.13.0 on the
# meta device (AutoModelForImageTextToText.from_config of each config; tests/tools/hf_param_counts.py
# counts the catalogue's Gemma 3 row the same way).
TRANSFORMERS_COUNTS = [
    ("gemma3", GEMMA3, 5376, 423_060_336),  # google/gemma-3-27b: SigLIP 896 px / 14, 27 layers, no head
    ("gemma3", GEMMA3_NO_TOWER, 5376, 97_013_760),  # SiglipVisionConfig's defaults (224 / 16, 12 layers, head)
    ("gemma3", {**GEMMA3, "vision_config": {**GEMMA3["vision_config"], "vision_use_head": True, "image_size": 900}},
     5376, 438_298_688),  # 900 // 14 = 64 patches a side; the attention-pooling head
    ("mistral3", MISTRAL3, 5120, 438_958_080),  # mistralai/Mistral-Small-3.1-24B: Pixtral 24 layers + projector
    ("mistral3", MISTRAL3_NO_TOWER, 5120, 438_958_080),  # Mistral3Config's own vision defaults: the same tower
    ("mistral3", {**MISTRAL3, "spatial_merge_size": 3, "multimodal_projector_bias": True,
                  "vision_feature_layer": [-1, -2]}, 5120, 449_454_080),
]


@pytest.mark.parametrize(("model_type", "config", "text_hidden", "expected"), TRANSFORMERS_COUNTS)
def test_tower_and_projector_count_as_transformers_builds_them(model_type, config, text_hidden, expected) -> None:
    assert vision_params(model_type, copy.deepcopy(config), text_hidden, "test") == expected


def test_gemma3_checkpoint_counts_its_tower_beside_the_decoder() -> None:
    arch = architecture_from_config(GEMMA3, name="gemma-3-27b", source="test")
    counts = count_params(arch)
    # hub safetensors 27.4B: decoder 27,009,346,304 (tests/golden_params.py) + tower 423,060,336
    assert (arch.vision_params, counts.total, counts.active) == (423_060_336, 27_432_406_640, 27_009_346_304)
    assert packaged_catalogue().architecture("gemma-3-27b").vision_params == 423_060_336


def test_decoder_only_and_text_only_classes_count_no_tower() -> None:
    scout = json.loads((FIXTURES / "llama-4-scout.json").read_text())
    # AutoModelForCausalLM maps llama4 to Llama4ForCausalLM: the checkpoint's vision weights stay on disk
    assert architecture_from_config(scout, name="scout", source="test").vision_params == 0
    text_only = {**GEMMA3["text_config"]}  # Gemma 3 1B's kind of file: a gemma3_text decoder alone
    assert architecture_from_config(text_only, name="gemma-3-text", source="test").vision_params == 0


@pytest.mark.parametrize(("config", "named"), [
    ({**GEMMA3, "vision_config": {**GEMMA3["vision_config"], "hidden_size": "1152"}}, "vision_config.hidden_size"),
    ({**GEMMA3, "vision_config": {**GEMMA3["vision_config"], "num_hidden_layers": 0}}, "vision_config.num_hidden_layers"),
    ({**GEMMA3, "vision_config": {**GEMMA3["vision_config"], "vision_use_head": "no"}}, "vision_config.vision_use_head"),
    ({**GEMMA3, "vision_config": {**GEMMA3["vision_config"], "model_type": "clip_vision_model"}}, "vision_config.model_type"),
    ({**GEMMA3, "vision_config": [1, 2]}, "vision_config"),
    # each key in range, the tower beyond Architecture.vision_params' 10^12: named as the file's key
    ({**GEMMA3, "vision_config": {**GEMMA3["vision_config"], "hidden_size": 9_000_000, "intermediate_size": 9_000_000}},
     "vision_config: the tower and projector come to"),
    ({**MISTRAL3, "spatial_merge_size": 0}, "spatial_merge_size"),
    ({**MISTRAL3, "multimodal_projector_bias": "yes"}, "multimodal_projector_bias"),
    ({**MISTRAL3, "vision_feature_layer": "last"}, "vision_feature_layer"),
])
def test_a_bad_tower_value_is_one_line_naming_its_key(config, named) -> None:
    with pytest.raises(VramplanError) as caught:
        architecture_from_config(config, name="m", source="config.json")
    assert named in str(caught.value) and "\n" not in str(caught.value)


def _twins():
    arch = architecture_from_config(GEMMA3, name="gemma-3-27b", source="test")
    return arch, arch.model_copy(update={"vision_params": 0, "name": "gemma-3-27b-decoder"})


def _memory(arch, job, plan):
    gpu = packaged_catalogue().gpu("h200-sxm-141gb")
    return memory_per_gpu(arch, job, plan, gpu).states


def test_full_fine_tuning_trains_the_tower_and_lora_keeps_it_frozen() -> None:
    arch, decoder = _twins()
    tower = arch.vision_params
    plan = Plan(gpu="h200-sxm-141gb", num_gpus=8, zero=0, micro_batch=1, grad_accum=1)
    full = Job(seq_len=2048, method="full", stack="deepspeed")
    with_tower, without = _memory(arch, full, plan), _memory(decoder, full, plan)
    # the tower trains like the decoder: 16-bit weights and gradients, fp32 master + AdamW's two moments
    assert with_tower.weights_bytes - without.weights_bytes == 2 * tower
    assert with_tower.gradients_bytes - without.gradients_bytes == 2 * tower
    assert with_tower.optimizer_states_bytes - without.optimizer_states_bytes == 12 * tower
    lora = Job(seq_len=2048, method="lora", stack="hf")
    assert trainable_params(arch, lora) == trainable_params(decoder, lora)
    frozen, frozen_decoder = _memory(arch, lora, plan), _memory(decoder, lora, plan)
    assert frozen.weights_bytes - frozen_decoder.weights_bytes == 2 * tower
    assert (frozen.gradients_bytes, frozen.optimizer_states_bytes) == (
        frozen_decoder.gradients_bytes, frozen_decoder.optimizer_states_bytes)


def test_the_tower_sits_on_the_first_stage_and_costs_no_flops() -> None:
    arch, decoder = _twins()
    plan = Plan(gpu="h200-sxm-141gb", num_gpus=4, pp=2, zero=0, micro_batch=1, grad_accum=4)
    job = Job(seq_len=2048, method="full", stack="megatron")
    gpu = packaged_catalogue().gpu("h200-sxm-141gb")
    first, last = (stage_memory(arch, job, plan, gpu, None, s).states for s in (0, 1))
    first_decoder, last_decoder = (stage_memory(decoder, job, plan, gpu, None, s).states for s in (0, 1))
    assert first.weights_bytes - first_decoder.weights_bytes == 2 * arch.vision_params
    assert last.weights_bytes == last_decoder.weights_bytes
    assert plan_flops_per_token(arch, job, plan) == plan_flops_per_token(decoder, job, plan)
