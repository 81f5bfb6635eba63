"""Hub ids resolve to config.json through huggingface_hub, from a cache folder this test builds
(HF_HUB_CACHE layout), with HF_HUB_OFFLINE=1: no test touches the network."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("huggingface_hub")

from helpers.paths import HF_CONFIGS  # noqa: E402

from vramplan.models.architecture.params import count_params  # noqa: E402
from vramplan.models.core.errors import VramplanError  # noqa: E402

REVISION = "0123456789abcdef0123456789abcdef01234567"


def _cache(root: Path, repo_id: str, fixture: str) -> None:
    repo = root / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / REVISION
    snapshot.mkdir(parents=True)
    shutil.copy(HF_CONFIGS / f"{fixture}.json", snapshot / "config.json")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REVISION, encoding="utf-8")


@pytest.fixture
def offline_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    _cache(tmp_path, "Qwen/Qwen3-8B", "qwen3-8b")
    _cache(tmp_path, "deepseek-ai/DeepSeek-V3", "deepseek-v3")
    return tmp_path


def test_hub_id_reads_the_cached_config(offline_cache, catalogue) -> None:
    arch = catalogue.architecture("Qwen/Qwen3-8B")
    assert arch.name == "qwen3-8b" and arch.source == "hub:Qwen/Qwen3-8B"
    assert count_params(arch).total == 8_190_735_360  # transformers 5.24 meta-device count
    assert count_params(catalogue.architecture("deepseek-ai/DeepSeek-V3")).total == 671_026_404_352


def test_offline_hub_id_not_in_cache_is_one_line_error(offline_cache, catalogue) -> None:
    with pytest.raises(VramplanError) as caught:
        catalogue.architecture("meta-llama/Llama-9-1T")
    message = str(caught.value)
    assert "meta-llama/Llama-9-1T" in message and "HF_HUB_OFFLINE" in message and "\n" not in message
