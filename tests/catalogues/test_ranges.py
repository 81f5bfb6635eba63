"""The packaged catalogues' values are plausible (docs/design.md section 6): GPU memory, throughput
and bandwidth, offering prices, host memory and dates, architecture shapes and sizes, and the
parameter counts of well-known models.
"""

from __future__ import annotations

import json
import re

from helpers.paths import HF_CONFIGS

from vramplan.models.architecture.params import count_params

MIB = 2**20

# --- plausible ranges: GPUs ----------------------------------------------------------------------


def test_gpu_usable_memory_is_plausible(catalogue):
    """Usable MiB lies between 80% of the marketed size read as GB and the marketed size read as GiB.

    Marketed "80 GB" HBM is really 80 GiB of DRAM (H100 reports 81559 MiB = 85.5 GB, README
    conventions), so the driver total usually exceeds marketed_gb * 1e9 / 2^20 but never the
    marketed figure read as GiB.
    """
    for gpu in catalogue.gpus.values():
        as_gb_mib = gpu.memory_marketed_gb * 1e9 / MIB
        as_gib_mib = gpu.memory_marketed_gb * 1024
        assert 0.8 * as_gb_mib < gpu.memory_usable_mib <= as_gib_mib, gpu.name
        assert gpu.memory_usable_bytes == gpu.memory_usable_mib * MIB


def test_gpu_name_states_its_marketed_memory(catalogue):
    for gpu in catalogue.gpus.values():
        match = re.search(r"-(\d+)gb$", gpu.name)
        assert match, f"{gpu.name} does not end in -<N>gb"
        assert int(match.group(1)) == gpu.memory_marketed_gb, gpu.name


def test_gpu_throughputs_are_plausible(catalogue):
    for gpu in catalogue.gpus.values():
        assert 1 <= gpu.fp32_dense_tflops <= 500, gpu.name
        assert gpu.fp32_dense_tflops < gpu.fp16_dense_tflops <= 5000, gpu.name
        assert gpu.bf16_dense_tflops == 0 or 10 <= gpu.bf16_dense_tflops <= 5000, gpu.name
        assert gpu.fp8_supported == (gpu.fp8_dense_tflops > 0), gpu.name
        if gpu.fp8_supported:
            assert gpu.bf16_dense_tflops <= gpu.fp8_dense_tflops, gpu.name
            assert gpu.fp8_dense_tflops <= 2.1 * gpu.bf16_dense_tflops, gpu.name  # dense, not sparse
    assert catalogue.gpus["v100-sxm-32gb"].bf16_dense_tflops == 0  # Volta has no bf16
    assert not catalogue.gpus["a100-sxm-80gb"].fp8_supported
    assert catalogue.gpus["h100-sxm-80gb"].fp8_supported


def test_gpu_bandwidths_are_plausible(catalogue):
    for gpu in catalogue.gpus.values():
        assert 100 <= gpu.hbm_bandwidth_gb_per_s <= 20000, gpu.name
        assert 8 <= gpu.intra_node_bandwidth_gb_per_s <= 2000, gpu.name  # one direction
        assert 0 < gpu.network_bandwidth_gb_per_s <= gpu.intra_node_bandwidth_gb_per_s, gpu.name
        assert gpu.gpus_per_node in (1, 2, 4, 8, 16, 36, 72), gpu.name


def test_gpu_vendor_matches_name(catalogue):
    for gpu in catalogue.gpus.values():
        assert gpu.vendor == ("amd" if gpu.name.startswith("mi") else "nvidia"), gpu.name


# --- plausible ranges: offerings -----------------------------------------------------------------


def test_offering_prices_are_plausible(catalogue):
    for offering in catalogue.offerings.values():
        assert 0.1 <= offering.price_usd_per_gpu_hour <= 20, offering.name
        if offering.spot_price_usd_per_hour is not None:
            assert offering.spot_price_usd_per_hour < offering.price_usd_per_hour, offering.name


def test_offering_host_memory_and_size_are_plausible(catalogue):
    for offering in catalogue.offerings.values():
        assert offering.host_memory_gib >= 8, offering.name
        assert offering.host_memory_gib / offering.num_gpus >= 8, offering.name
        assert offering.num_gpus <= catalogue.gpus[offering.gpu].gpus_per_node, offering.name


def test_every_offering_names_a_known_gpu_and_is_dated(catalogue):
    for offering in catalogue.offerings.values():
        assert offering.gpu in catalogue.gpus, offering.name
        assert re.fullmatch(r"\d{4}-\d{2}(-\d{2})?", offering.price_date), offering.name
        assert 2024 <= int(offering.price_date[:4]) <= 2030, offering.name
        assert offering.source.strip(), offering.name


def test_every_gpu_can_be_priced(catalogue):
    unpriced = [name for name in catalogue.gpus if not catalogue.offerings_for(name)]
    assert not unpriced


def test_exactly_one_list_row_per_gpu(catalogue):
    list_rows = [o for o in catalogue.offerings.values() if o.provider == "list"]
    assert sorted(o.gpu for o in list_rows) == sorted(catalogue.gpus)
    for offering in list_rows:
        assert offering.instance_type == f"{offering.gpu}-x{offering.num_gpus}", offering.name


def test_main_providers_present(catalogue):
    providers = {o.provider for o in catalogue.offerings.values()}
    assert {"aws", "lambda", "runpod"} <= providers


# --- plausible ranges: architectures -------------------------------------------------------------


def _sets_head_dim(name: str) -> bool:
    """Gemma, Qwen3, Llama 4 and MLA configs give head_dim explicitly, not hidden / heads."""
    path = HF_CONFIGS / f"{name}.json"
    if not path.exists():
        return False
    config = json.loads(path.read_text(encoding="utf-8"))
    config = config.get("text_config", config)
    return "head_dim" in config or "qk_nope_head_dim" in config or config["model_type"] == "gemma2"


def test_architecture_shapes_are_consistent(catalogue):
    for arch in catalogue.architectures.values():
        if _sets_head_dim(arch.name):
            continue  # head_dim set explicitly (README: head_dim column)
        assert arch.hidden_size == arch.num_attention_heads * arch.head_dim, arch.name
    for arch in catalogue.architectures.values():
        assert arch.num_attention_heads % arch.num_kv_heads == 0, arch.name
        assert arch.head_dim in (64, 128, 192, 256), arch.name  # 192: MLA's 128 + 64 rope
        # gpt-oss's experts are exactly as wide as the model (2880)
        assert (arch.dense_intermediate_size or arch.intermediate_size) >= arch.hidden_size, arch.name
        assert 1000 <= arch.vocab_size <= 1_000_000, arch.name
        assert arch.max_position_embeddings >= 1024, arch.name
        assert arch.learned_position_embeddings == (arch.model_type == "gpt2"), arch.name
        assert arch.experts_per_token <= arch.num_experts, arch.name
        assert (arch.final_logit_softcapping is not None) == (arch.model_type == "gemma2"), arch.name
    gemma = catalogue.architectures["gemma-2-9b"]
    assert gemma.hidden_size != gemma.num_attention_heads * gemma.head_dim  # the documented exception


# Named by the parameters outside the token embedding: Llama 3.2 1B holds 1.24B, 0.97B without its
# (tied) 128,256 x 2,048 embedding (meta-llama/Llama-3.2-1B model card: "1.23B")
NAMED_WITHOUT_EMBEDDING = {"llama-3.2-1b"}


def test_dense_architecture_size_matches_its_name(catalogue):
    """gpt2-124m has ~124M parameters, llama-2-70b ~70B, within 15% (MoE names are not totals)."""
    for arch in catalogue.architectures.values():
        match = re.search(r"-(\d+(?:\.\d+)?)([mb])$", arch.name)
        if arch.is_moe or not match:
            continue
        named = float(match.group(1)) * (1e6 if match.group(2) == "m" else 1e9)
        params = count_params(arch)
        total = params.total - (params.embedding if arch.name in NAMED_WITHOUT_EMBEDDING else 0)
        assert abs(total - named) <= 0.15 * named, f"{arch.name}: {total:,}"


def test_known_parameter_counts(catalogue):
    assert count_params(catalogue.architectures["llama-3.1-8b"]).total == 8_030_261_248
    assert count_params(catalogue.architectures["llama-3.1-70b"]).total == 70_553_706_496
    assert count_params(catalogue.architectures["gpt2-124m"]).total == 124_439_808
    mixtral = count_params(catalogue.architectures["mixtral-8x7b"])
    assert mixtral.total == 46_702_792_704
    assert mixtral.active < mixtral.total

