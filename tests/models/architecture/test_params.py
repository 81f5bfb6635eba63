"""Exact parameter counts against what Hugging Face transformers builds (tests/golden_params.py)."""

from __future__ import annotations

import pytest
from golden_params import HF_PARAM_COUNTS

from vramplan.models.architecture.params import count_params


@pytest.mark.parametrize("name", sorted(HF_PARAM_COUNTS))
def test_counts_equal_transformers(catalogue, name: str) -> None:
    counts = count_params(catalogue.architecture(name))
    golden = HF_PARAM_COUNTS[name]
    assert counts.total == golden["total"]
    assert counts.embedding == golden["embedding"]
    assert counts.per_layer == golden["per_layer"]
    assert counts.final_norm == golden["final_norm"]
    assert counts.lm_head == golden["lm_head"]
    assert counts.active == golden["active"]


def test_every_catalogue_row_has_a_golden_count(catalogue) -> None:
    assert set(catalogue.architectures) == set(HF_PARAM_COUNTS)


# Published figures (model cards / safetensors metadata; compiled in the project's reference notes).
PUBLISHED = {
    "gpt2-124m": 124_439_808,
    "gpt2-1.5b": 1_557_611_200,
    "llama-2-7b": 6_738_415_616,
    "llama-3.1-8b": 8_030_261_248,
    "llama-3.1-70b": 70_553_706_496,
    "mistral-7b": 7_241_732_096,
    "qwen2.5-7b": 7_615_616_512,
    "gemma-2-9b": 9_241_705_984,
}


@pytest.mark.parametrize(("name", "total"), sorted(PUBLISHED.items()))
def test_published_totals(catalogue, name: str, total: int) -> None:
    assert count_params(catalogue.architecture(name)).total == total


def test_mixtral_active_parameters_are_two_of_eight_experts(catalogue) -> None:
    counts = count_params(catalogue.architecture("mixtral-8x7b"))
    assert counts.total == 46_702_792_704
    # 32 layers x 6 unused experts x 3 x 4096 x 14336 = 33,822,867,456 inactive parameters.
    assert counts.total - counts.active == 32 * 6 * 3 * 4096 * 14336
    assert 12.8e9 < counts.active < 13.0e9  # "12.9B active parameters" (Mixtral paper)
