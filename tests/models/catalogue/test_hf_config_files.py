"""A Hugging Face config.json (a file or its folder) as --model (docs/design.md section 6): every
fixture counts and reads exactly like its catalogue twin, and a missing, broken or unsupported
config is a one-line VramplanError naming it.
"""

from __future__ import annotations

import json

import pytest
from helpers.catalogue import REQUIRED_ARCHITECTURES, assert_one_line_message
from helpers.paths import HF_CONFIGS

from vramplan.models.architecture.params import count_params
from vramplan.models.catalogue.hf_config import architecture_from_config_file
from vramplan.models.core.errors import VramplanError

FIXTURES_WITH_TWIN = sorted(p.stem for p in HF_CONFIGS.glob("*.json") if p.stem in REQUIRED_ARCHITECTURES)


def test_fixtures_cover_most_of_the_catalogue():
    assert len(FIXTURES_WITH_TWIN) >= 14  # every catalogue row but gpt3-175b (not on the hub)


@pytest.mark.parametrize("name", FIXTURES_WITH_TWIN)
def test_hf_config_counts_like_its_catalogue_twin(name, catalogue):
    from_config = catalogue.architecture(str(HF_CONFIGS / f"{name}.json"))
    twin = catalogue.architecture(name)
    assert count_params(from_config).total == count_params(twin).total
    assert count_params(from_config).active == count_params(twin).active
    assert from_config.model_dump(exclude={"name", "source"}) == twin.model_dump(exclude={"name", "source"})
    assert from_config.name == name  # named after the file stem


def test_hf_config_llama_3_1_8b(catalogue):
    arch = catalogue.architecture(str(HF_CONFIGS / "llama-3.1-8b.json"))
    assert count_params(arch).total == 8_030_261_248


def test_unsupported_hf_config_is_one_line_error(catalogue):
    with pytest.raises(VramplanError) as caught:
        catalogue.architecture(str(HF_CONFIGS / "unsupported-t5.json"))
    assert_one_line_message(caught.value, "model_type", "t5")


def test_missing_hf_config_is_one_line_error(catalogue, tmp_path):
    with pytest.raises(VramplanError) as caught:
        catalogue.architecture(str(tmp_path / "nope.json"))
    assert_one_line_message(caught.value, "nope.json")


def test_invalid_json_hf_config_is_one_line_error(catalogue, tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"model_type": "llama",\n  "hidden_size": }\n', encoding="utf-8")
    with pytest.raises(VramplanError) as caught:
        catalogue.architecture(str(broken))
    assert_one_line_message(caught.value, str(broken))


def test_unknown_architecture_name_suggests_close_names(catalogue):
    with pytest.raises(VramplanError) as caught:
        catalogue.architecture("llama-3.1-7b")
    assert_one_line_message(caught.value, "llama-3.1-7b", "llama-3.1-8b")


def test_model_directory_with_config_json(catalogue, tmp_path):
    model_dir = tmp_path / "Llama-3.1-8B"
    model_dir.mkdir()
    source = HF_CONFIGS / "llama-3.1-8b.json"
    (model_dir / "config.json").write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    arch = catalogue.architecture(str(model_dir))
    assert arch.name == "llama-3.1-8b" and count_params(arch).total == 8_030_261_248



SECRET = "TOKEN=hf_s3cr3t"


@pytest.mark.parametrize("key", ["hidden_act", "tie_word_embeddings", "sliding_window", "num_hidden_layers",
                                 "attn_logit_softcapping", "vocab_size"])
def test_a_config_error_names_the_file_and_key_never_the_value(tmp_path, key):
    """A file passed as --model may hold anything: nine config.json keys used to echo their value
    in the error (and so in a batch's output cell); now the kind of value, the key and the file."""
    config = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
              "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 2048, key: SECRET}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(VramplanError) as caught:
        architecture_from_config_file(path)
    message = str(caught.value)
    assert SECRET not in message and "s3cr3t" not in message, message
    assert key in message and str(path) in message
