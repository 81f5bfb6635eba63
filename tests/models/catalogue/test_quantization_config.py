"""config.json's quantization_config: read into Architecture.checkpoint_quantization (never ignored),
its stored bytes (models/architecture/quantization.py), and what training does with it."""

from __future__ import annotations

import json

import pytest
from helpers.paths import HF_CONFIGS
from pydantic import ValidationError

from vramplan.models.architecture.params import count_params, layer_groups
from vramplan.models.architecture.quantization import (
    WeightFormat,
    checkpoint_format,
    frozen_base_format,
    matrix_bytes,
    parse_format,
    quantised_weight_bytes,
    quantization_note,
    skipped_matrices,
)
from vramplan.models.catalogue.hf_config import architecture_from_config, architecture_from_config_file
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.model_states import frozen_base_bytes, model_states
from vramplan.models.memory.precision import nf4_bytes_per_param

SECRET = "TOKEN=hf_s3cr3t"


def _llama(quantization_config=None):
    config = json.loads((HF_CONFIGS / "llama-3.1-8b.json").read_text(encoding="utf-8"))
    if quantization_config is not None:
        config["quantization_config"] = quantization_config
    return architecture_from_config(config, name="llama-3.1-8b", source="config.json")


@pytest.mark.parametrize(("config", "text"), [
    ({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False}, "gptq:4:128"),
    ({"quant_method": "gptq", "bits": 8, "group_size": -1}, "gptq:8:0"),
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm", "zero_point": True}, "awq:4:128"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
      "bnb_4bit_use_double_quant": True}, "nf4:dq"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "fp4"),  # BitsAndBytesConfig defaults: fp4, no double quant
    ({"load_in_8bit": True}, "int8"),  # written before quant_method existed
    # llm_int8_skip_modules beyond the lm_head (never quantised): the entries, whose matrices are
    # counted in 16 bits (Unsloth's dynamic 4-bit checkpoints); an entry that is no module pattern
    # leaves the flag alone (counted quantised, and said so)
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True,
      "llm_int8_skip_modules": ["lm_head"]}, "nf4:dq"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True,
      "llm_int8_skip_modules": ["lm_head", "model.layers.1.mlp"]}, "nf4:dq:skip=model.layers.1.mlp"),
    ({"load_in_8bit": True, "llm_int8_skip_modules": ["vision_tower", "mlp.gate"]}, "int8:skip=vision_tower|mlp.gate"),
    ({"load_in_8bit": True, "llm_int8_skip_modules": ["(a+)+$"]}, "int8:skip"),
    ({"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}, "fp8:128:128"),
    ({"quant_method": "fp8", "activation_scheme": "static"}, "fp8"),
    ({"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]}, "mxfp4"),
])
def test_quantization_config_is_read(config: dict, text: str) -> None:
    arch = _llama(config)
    assert arch.checkpoint_quantization == text
    assert parse_format(text).text() == text
    assert count_params(arch).total == 8_030_261_248  # the parameters are the same; their bytes are not


def test_gpt_oss_fixture_is_mxfp4() -> None:
    assert architecture_from_config_file(HF_CONFIGS / "gpt-oss-20b.json").checkpoint_quantization == "mxfp4"
    assert _llama().checkpoint_quantization == ""


@pytest.mark.parametrize(("config", "key"), [
    ({"quant_method": SECRET}, "quantization_config.quant_method"),
    ({"quant_method": "hqq"}, "quantization_config.quant_method"),
    ({"quant_method": "gptq", "bits": SECRET}, "quantization_config.bits"),
    ({"quant_method": "awq", "bits": 4, "group_size": 0}, "quantization_config.group_size"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": SECRET},
     "quantization_config.bnb_4bit_quant_type"),
    ({"quant_method": "bitsandbytes"}, "quantization_config.load_in_4bit"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "llm_int8_skip_modules": SECRET},
     "quantization_config.llm_int8_skip_modules"),
    # transformers refuses both (BitsAndBytesConfig); it was read as 8-bit without a word
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "load_in_8bit": True}, "quantization_config.load_in_8bit"),
    ({"quant_method": "fp8", "weight_block_size": [128, SECRET]}, "quantization_config.weight_block_size"),
    (SECRET, "quantization_config"),
])
def test_a_bad_quantization_config_names_the_file_and_key_never_the_value(tmp_path, config, key: str) -> None:
    base = json.loads((HF_CONFIGS / "llama-3.1-8b.json").read_text(encoding="utf-8"))
    path = tmp_path / "config.json"
    path.write_text(json.dumps(base | {"quantization_config": config}), encoding="utf-8")
    with pytest.raises(VramplanError) as caught:
        architecture_from_config_file(path)
    message = str(caught.value)
    assert key in message and str(path) in message and "\n" not in message
    assert "s3cr3t" not in message and "hqq" not in message


def test_the_schema_refuses_a_format_it_cannot_parse(catalogue) -> None:
    row = catalogue.architecture("llama-3.1-8b").model_dump()
    with pytest.raises(ValidationError):
        type(catalogue.architecture("llama-3.1-8b"))(**(row | {"checkpoint_quantization": "gptq:5:128"}))


def test_stored_bytes_of_one_matrix() -> None:
    k = n = 4096
    w = k * n
    # GPTQ 4-bit, group 128: qweight W/2, qzeros 32 x 4096 x 4 bits, fp16 scales 32 x 4096, int32 g_idx
    assert matrix_bytes(WeightFormat("gptq", 4, 128), k, n) == w // 2 + 32 * n // 2 + 2 * 32 * n + 4 * k
    assert matrix_bytes(WeightFormat("awq", 4, 128), k, n) == w // 2 + 32 * n // 2 + 2 * 32 * n
    assert matrix_bytes(WeightFormat("gptq", 4, 0), k, n) == w // 2 + n // 2 + 2 * n + 4 * k  # group_size -1
    assert matrix_bytes(WeightFormat("nf4", double_quant=True), k, n) == w * nf4_bytes_per_param()  # 4.127 bits
    assert matrix_bytes(WeightFormat("nf4"), k, n) == w // 2 + 4 * w // 64
    assert matrix_bytes(WeightFormat("int8"), k, n) == w + 4 * n
    assert matrix_bytes(WeightFormat("fp8", group=128, cols=128), k, n) == w + 4 * 32 * 32
    assert matrix_bytes(WeightFormat("fp8"), k, n) == w + 4
    # gpt-oss gate_up [2880 -> 5760]: 90 blocks of 32 per output row, 16 bytes + one scale each
    assert matrix_bytes(WeightFormat("mxfp4"), 2880, 5760) == 17 * 2880 * 5760 // 32


def _block_weights(arch) -> int:
    return sum(g.count * m.copies_per_layer * m.in_features * m.out_features for g in layer_groups(arch) for m in g.modules)


def test_lora_on_a_gptq_checkpoint_keeps_the_stored_base() -> None:
    arch = _llama({"quant_method": "gptq", "bits": 4, "group_size": 128})
    stored = sum(g.count * m.copies_per_layer * matrix_bytes(WeightFormat("gptq", 4, 128), m.in_features, m.out_features)
                 for g in layer_groups(arch) for m in g.modules)
    rest = count_params(arch).total - _block_weights(arch)
    for method in ("lora", "qlora"):  # QLoRA cannot re-quantise a GPTQ base: it is the checkpoint's
        job = Job(method=method, qlora_prep="16bit")
        assert frozen_base_format(arch, job) == WeightFormat("gptq", 4, 128)
        assert frozen_base_bytes(arch, job, "bf16") == stored + 2 * rest
    assert "GPTQ 4-bit (group 128)" in quantization_note(arch, Job(method="lora"))
    # --qlora-bits 8 changed nothing and said nothing
    assert "--qlora-bits does not re-quantise it" in quantization_note(arch, Job(method="qlora", qlora_bits=8))
    assert "--qlora-bits" not in quantization_note(arch, Job(method="lora"))
    unread = _llama({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
                     "llm_int8_skip_modules": ["(a+)+$"]})
    assert "counted quantised here: the weights read low" in quantization_note(unread, Job(method="qlora"))
    assert frozen_base_bytes(unread, Job(method="qlora", qlora_prep="16bit"), "bf16") == frozen_base_bytes(
        _llama({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}),
        Job(method="qlora", qlora_prep="16bit"), "bf16")  # the same bytes: the note is what changes


def test_skipped_modules_are_counted_in_16_bits() -> None:
    """Unsloth's dynamic 4-bit checkpoints keep listed modules as 16-bit nn.Linear; transformers 5
    matches an entry against each module's name from its start or at its end (quantizers_utils.py
    should_convert_module @ 0eb492cb), so 'model.layers.1' also keeps layers 10-19, and 'down_proj'
    every layer's down projection."""
    nf4 = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True}
    plain = _llama(nf4)
    fmt = WeightFormat("nf4", double_quant=True)
    job = Job(method="qlora", qlora_prep="16bit")
    attention = _llama({**nf4, "llm_int8_skip_modules": ["lm_head", "model.layers.0.self_attn", "model.layers.31.mlp.down_proj"]})
    layer = layer_groups(attention)[0].modules
    kept = [m for m in layer if m.name in ("q_proj", "k_proj", "v_proj", "o_proj")] + [m for m in layer if m.name == "down_proj"]
    extra = sum(2 * m.in_features * m.out_features - matrix_bytes(fmt, m.in_features, m.out_features) for m in kept)
    assert frozen_base_bytes(attention, job, "bf16") - frozen_base_bytes(plain, job, "bf16") == pytest.approx(extra, abs=1)
    assert "5 decoder matrices kept in 16 bits" in quantization_note(attention, job)
    assert sorted(skipped_matrices(attention, checkpoint_format(attention))) == [
        (0, "k_proj"), (0, "o_proj"), (0, "q_proj"), (0, "v_proj"), (31, "down_proj")]
    quirk = _llama({**nf4, "llm_int8_skip_modules": ["model.layers.1"]})
    assert {i for i, _ in skipped_matrices(quirk, checkpoint_format(quirk))} == {1, *range(10, 20)}
    every_down = _llama({**nf4, "llm_int8_skip_modules": ["down_proj"]})
    assert skipped_matrices(every_down, checkpoint_format(every_down)) == {(i, "down_proj") for i in range(32)}
    # a pipeline rank holding part of the model counts the densest layer's bytes per weight: never less
    half = count_params(attention).total // 2
    stored, held = quantised_weight_bytes(attention, checkpoint_format(attention), half, 0)
    assert stored >= quantised_weight_bytes(plain, fmt, half, 0)[0] and held == half


def test_full_fine_tuning_of_a_quantized_checkpoint_counts_16_bit_weights() -> None:
    plain, gptq = _llama(), _llama({"quant_method": "gptq", "bits": 4, "group_size": 128})
    plan = Plan(gpu="h100-sxm-80gb")
    assert model_states(gptq, Job(), plan) == model_states(plain, Job(), plan)
    assert "will not fully fine-tune" in quantization_note(gptq, Job())


@pytest.mark.parametrize("config", [{"quant_method": "mxfp4"}, {"quant_method": "fp8", "weight_block_size": [128, 128]}])
def test_mxfp4_and_fp8_checkpoints_train_dequantized(config: dict) -> None:
    plain, stored = _llama(), _llama(config)
    for job in (Job(method="lora"), Job(method="qlora"), Job(method="qlora", qlora_bits=8)):
        assert frozen_base_format(stored, job) == frozen_base_format(plain, job)
        assert frozen_base_bytes(stored, job, "bf16") == frozen_base_bytes(plain, job, "bf16")
    assert "dequantised to bf16" in quantization_note(stored, Job(method="lora"))
    assert quantization_note(plain, Job()) is None


def test_a_bitsandbytes_nf4_checkpoint_is_the_qlora_base() -> None:
    plain = _llama()
    bnb = _llama({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
                  "bnb_4bit_use_double_quant": True})
    qlora = frozen_base_bytes(plain, Job(method="qlora", qlora_prep="16bit"), "bf16")
    assert frozen_base_bytes(bnb, Job(method="lora"), "bf16") == qlora
    # unchanged from before checkpoint formats: 4.127 bits per decoder matmul weight, the rest 16-bit
    weights = _block_weights(plain)
    assert qlora == -(-weights * nf4_bytes_per_param().numerator // nf4_bytes_per_param().denominator) + 2 * (
        count_params(plain).total - weights)


def test_gpt_oss_mxfp4_covers_only_the_experts() -> None:
    from vramplan.models.architecture.quantization import quantised_weight_bytes

    arch = architecture_from_config_file(HF_CONFIGS / "gpt-oss-20b.json")
    expert = sum(g.count * m.copies_per_layer * m.in_features * m.out_features
                 for g in layer_groups(arch) for m in g.modules if m.copies_per_layer > 1)
    stored, held = quantised_weight_bytes(arch, WeightFormat("mxfp4"), _block_weights(arch) - expert, expert)
    assert held == expert and stored == 17 * expert // 32  # 10.2 GiB of MXFP4 experts as shipped


def test_estimate_says_what_it_assumed_of_a_quantised_checkpoint():
    """gpt-oss ships its experts in MXFP4: the plan counts bf16 weights and says so (a warning
    line), where quantization_config used to be ignored without a word."""
    from helpers.cli import invoke
    from helpers.paths import HF_CONFIGS

    result = invoke("estimate", "--model", str(HF_CONFIGS / "gpt-oss-20b.json"), "--seq-len", "1024",
                    "--gpu", "h100-sxm-80gb", "--method", "lora")
    assert result.exit_code in (0, 3), result.stderr
    assert "warning: the checkpoint stores MXFP4 weights" in result.stdout
