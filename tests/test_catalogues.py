"""The packaged catalogues, the user-CSV path and the HF config.json path (DESIGN section 6).

Header equals the pydantic model, every row validates, names unique, ranges plausible,
README documents every column, users can substitute their own CSV, and every bad CSV is a
one-line VramplanError naming the file and the field or value.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from vramplan.models.catalogue.catalogue import ARCHITECTURES_CSV, GPUS_CSV, OFFERINGS_CSV, load_catalogue
from vramplan.models.core.catalogue_schema import Architecture, GpuSpec, Offering
from vramplan.models.core.errors import VramplanError
from vramplan.models.architecture.params import count_params

TESTS_DIR = Path(__file__).resolve().parent
CATALOGUE_DIR = TESTS_DIR.parent / "catalogues"
HF_CONFIGS = TESTS_DIR / "fixtures" / "hf_configs"

SCHEMAS: dict[str, type[BaseModel]] = {GPUS_CSV: GpuSpec, OFFERINGS_CSV: Offering, ARCHITECTURES_CSV: Architecture}
# load_catalogue keyword for each file
OPTION = {GPUS_CSV: "gpus_csv", OFFERINGS_CSV: "offerings_csv", ARCHITECTURES_CSV: "models_csv"}

REQUIRED_GPUS = {
    "v100-sxm-32gb", "a10g-24gb", "l4-24gb", "l40s-48gb", "rtx4090-24gb", "a100-sxm-40gb", "a100-sxm-80gb",
    "h100-pcie-80gb", "h100-sxm-80gb", "h200-sxm-141gb", "b200-180gb", "mi300x-192gb", "mi325x-256gb",
}
REQUIRED_ARCHITECTURES = {
    "gpt2-124m", "gpt2-1.5b", "gpt3-175b", "llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3.1-8b",
    "llama-3.1-70b", "llama-3.1-405b", "mistral-7b", "mixtral-8x7b", "qwen2.5-7b", "qwen2.5-72b",
    "gemma-2-9b", "gemma-2-27b",
}
MIB = 2**20


@pytest.fixture(scope="module")
def catalogue():
    return load_catalogue()


def read_rows(name: str) -> tuple[list[str], list[dict[str, str]]]:
    text = (CATALOGUE_DIR / name).read_text(encoding="utf-8")
    reader = csv.DictReader(io.StringIO(text))
    return list(reader.fieldnames or []), list(reader)


def write_rows(path: Path, header: list[str], rows: list[dict[str, str]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return path


def assert_one_line_error(error: VramplanError, *fragments: str) -> None:
    message = str(error)
    assert message.strip(), "empty error message"
    assert "\n" not in message and "\r" not in message, f"error is not one line: {message!r}"
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} missing from error {message!r}"


# --- structure: header, rows, keys ---------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_header_equals_schema_field_order(name):
    header, _ = read_rows(name)
    assert header == list(SCHEMAS[name].model_fields)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_every_row_validates_and_is_loaded(name, catalogue):
    _, rows = read_rows(name)
    assert rows, f"{name} is empty"
    loaded = {GPUS_CSV: catalogue.gpus, OFFERINGS_CSV: catalogue.offerings, ARCHITECTURES_CSV: catalogue.architectures}
    assert len(loaded[name]) == len(rows)  # no row silently dropped or merged


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_keys_are_unique(name):
    _, rows = read_rows(name)
    if name == OFFERINGS_CSV:
        keys = [f"{r['provider']}/{r['instance_type']}" for r in rows]
    else:
        keys = [r["name"] for r in rows]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    assert not duplicates, f"duplicate keys in {name}: {duplicates}"


def test_packaged_catalogue_equals_the_same_files_given_as_user_csvs(catalogue):
    """The user-CSV path and the packaged path read the same schema the same way."""
    explicit = load_catalogue(
        gpus_csv=CATALOGUE_DIR / GPUS_CSV,
        offerings_csv=CATALOGUE_DIR / OFFERINGS_CSV,
        models_csv=CATALOGUE_DIR / ARCHITECTURES_CSV,
    )
    assert explicit == catalogue


def test_required_gpus_present(catalogue):
    assert REQUIRED_GPUS <= set(catalogue.gpus), sorted(REQUIRED_GPUS - set(catalogue.gpus))


def test_required_architectures_present(catalogue):
    missing = REQUIRED_ARCHITECTURES - set(catalogue.architectures)
    assert not missing, sorted(missing)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_every_row_has_a_source(name):
    _, rows = read_rows(name)
    for line, row in enumerate(rows, start=2):
        assert row["source"].strip(), f"{name} line {line} has no source"
        assert len(row["source"].strip()) >= 10, f"{name} line {line}: source {row['source']!r} is too vague"


def test_readme_documents_every_column():
    readme = (CATALOGUE_DIR / "README.md").read_text(encoding="utf-8")
    for file_name, model in SCHEMAS.items():
        assert f"`{file_name}`" in readme, f"README does not name {file_name}"
        assert model.__name__ in readme, f"README does not name the schema {model.__name__}"
        undocumented = [column for column in model.model_fields if f"`{column}`" not in readme]
        assert not undocumented, f"README lacks columns of {file_name}: {undocumented}"


def test_readme_documents_columns_in_each_files_own_table():
    """Each `## \\`file\\` columns` section lists exactly that file's columns as table rows."""
    readme = (CATALOGUE_DIR / "README.md").read_text(encoding="utf-8")
    for file_name, model in SCHEMAS.items():
        match = re.search(rf"^## `{re.escape(file_name)}` columns\n(.*?)(?=^## |\Z)", readme, re.M | re.S)
        assert match, f"README has no '## `{file_name}` columns' section"
        rows = re.findall(r"^\| `([a-z0-9_]+)` \|", match.group(1), re.M)
        assert rows == list(model.model_fields), f"{file_name} README table {rows} != schema"


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
        assert (arch.dense_intermediate_size or arch.intermediate_size) > arch.hidden_size, arch.name
        assert 1000 <= arch.vocab_size <= 1_000_000, arch.name
        assert arch.max_position_embeddings >= 1024, arch.name
        assert arch.learned_position_embeddings == (arch.model_type == "gpt2"), arch.name
        assert arch.experts_per_token <= arch.num_experts, arch.name
        assert (arch.final_logit_softcapping is not None) == (arch.model_type == "gemma2"), arch.name
    gemma = catalogue.architectures["gemma-2-9b"]
    assert gemma.hidden_size != gemma.num_attention_heads * gemma.head_dim  # the documented exception


def test_dense_architecture_size_matches_its_name(catalogue):
    """gpt2-124m has ~124M parameters, llama-2-70b ~70B, within 15% (MoE names are not totals)."""
    for arch in catalogue.architectures.values():
        match = re.search(r"-(\d+(?:\.\d+)?)([mb])$", arch.name)
        if arch.is_moe or not match:
            continue
        named = float(match.group(1)) * (1e6 if match.group(2) == "m" else 1e9)
        total = count_params(arch).total
        assert abs(total - named) <= 0.15 * named, f"{arch.name}: {total:,}"


def test_known_parameter_counts(catalogue):
    assert count_params(catalogue.architectures["llama-3.1-8b"]).total == 8_030_261_248
    assert count_params(catalogue.architectures["llama-3.1-70b"]).total == 70_553_706_496
    assert count_params(catalogue.architectures["gpt2-124m"]).total == 124_439_808
    mixtral = count_params(catalogue.architectures["mixtral-8x7b"])
    assert mixtral.total == 46_702_792_704
    assert mixtral.active < mixtral.total


# --- the HF config.json path ---------------------------------------------------------------------

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
    assert_one_line_error(caught.value, "model_type", "t5")


def test_missing_hf_config_is_one_line_error(catalogue, tmp_path):
    with pytest.raises(VramplanError) as caught:
        catalogue.architecture(str(tmp_path / "nope.json"))
    assert_one_line_error(caught.value, "nope.json")


def test_invalid_json_hf_config_is_one_line_error(catalogue, tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"model_type": "llama",\n  "hidden_size": }\n', encoding="utf-8")
    with pytest.raises(VramplanError) as caught:
        catalogue.architecture(str(broken))
    assert_one_line_error(caught.value, str(broken))


def test_unknown_architecture_name_suggests_close_names(catalogue):
    with pytest.raises(VramplanError) as caught:
        catalogue.architecture("llama-3.1-7b")
    assert_one_line_error(caught.value, "llama-3.1-7b", "llama-3.1-8b")


# --- the user-CSV path ---------------------------------------------------------------------------


def test_user_gpu_csv_adds_a_private_gpu(tmp_path):
    header, rows = read_rows(GPUS_CSV)
    private = dict(rows[[r["name"] for r in rows].index("h100-sxm-80gb")])
    private.update(name="acme-x1-96gb", memory_marketed_gb="96", memory_usable_mib="97000",
                   source="our own nvidia-smi, 2026-12-01")
    path = write_rows(tmp_path / "my_gpus.csv", header, rows + [private])
    catalogue = load_catalogue(gpus_csv=path)
    assert catalogue.gpu("acme-x1-96gb").memory_usable_mib == 97000
    assert catalogue.gpu("h100-sxm-80gb") == load_catalogue().gpu("h100-sxm-80gb")


def test_user_gpu_csv_replaces_the_packaged_one(tmp_path):
    """A file replaces, not merges: a GPU-only file plus offerings for it is a whole catalogue."""
    header, rows = read_rows(GPUS_CSV)
    only = [dict(r) for r in rows if r["name"] == "l4-24gb"]
    gpus = write_rows(tmp_path / "gpus.csv", header, only)
    o_header, o_rows = read_rows(OFFERINGS_CSV)
    offerings = write_rows(tmp_path / "offerings.csv", o_header, [r for r in o_rows if r["gpu"] == "l4-24gb"])
    catalogue = load_catalogue(gpus_csv=gpus, offerings_csv=offerings)
    assert list(catalogue.gpus) == ["l4-24gb"]
    assert {o.gpu for o in catalogue.offerings.values()} == {"l4-24gb"}


def test_user_offerings_csv_negotiated_price(tmp_path):
    header, rows = read_rows(OFFERINGS_CSV)
    for row in rows:
        if (row["provider"], row["instance_type"]) == ("aws", "p5.48xlarge"):
            row.update(price_usd_per_hour="40", price_date="2026-12-01", source="our contract")
    rows.append({**rows[0], "provider": "acme-cloud", "instance_type": "h100x8", "gpu": "h100-sxm-80gb",
                 "num_gpus": "8", "price_usd_per_hour": "12.5", "spot_price_usd_per_hour": "",
                 "price_date": "2026-12", "source": "negotiated quote 2026-12"})
    catalogue = load_catalogue(offerings_csv=write_rows(tmp_path / "prices.csv", header, rows))
    assert catalogue.offering("aws/p5.48xlarge").price_usd_per_hour == 40.0
    assert catalogue.offering("aws/p5.48xlarge").price_usd_per_gpu_hour == 5.0
    ours = catalogue.offering("acme-cloud/h100x8")
    assert ours.spot_price_usd_per_hour is None  # empty cell = unknown
    assert ours in catalogue.offerings_for("h100-sxm-80gb")


def test_user_models_csv_adds_an_architecture(tmp_path):
    header, rows = read_rows(ARCHITECTURES_CSV)
    tiny = dict(rows[[r["name"] for r in rows].index("llama-3.1-8b")])
    tiny.update(name="tiny-llama", num_layers="2", hidden_size="256", num_attention_heads="4", num_kv_heads="2",
                head_dim="64", intermediate_size="512", vocab_size="1000", source="made up for a test")
    catalogue = load_catalogue(models_csv=write_rows(tmp_path / "arch.csv", header, [tiny]))
    assert list(catalogue.architectures) == ["tiny-llama"]
    assert count_params(catalogue.architecture("tiny-llama")).total > 0


def test_user_csv_with_bom_and_crlf_loads(tmp_path):
    text = (CATALOGUE_DIR / GPUS_CSV).read_text(encoding="utf-8")
    path = tmp_path / "excel.csv"
    path.write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode("utf-8"))
    assert load_catalogue(gpus_csv=path).gpus == load_catalogue().gpus


# --- bad user CSVs: one-line VramplanError naming the file and the field or value ---------------


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@pytest.mark.parametrize("damage", ["rename", "drop", "reorder", "extra"])
def test_wrong_header_is_one_line_error(name, damage, tmp_path):
    header, rows = read_rows(name)
    bad = list(header)
    if damage == "rename":
        bad[1] = bad[1] + "_typo"
        rows = [{(bad[1] if k == header[1] else k): v for k, v in r.items()} for r in rows]
    elif damage == "drop":
        bad.remove(header[2])
        rows = [{k: v for k, v in r.items() if k != header[2]} for r in rows]
    elif damage == "reorder":
        bad[0], bad[1] = bad[1], bad[0]
    else:
        bad.append("comment")
    path = write_rows(tmp_path / f"bad-{name}", bad, rows)
    with pytest.raises(VramplanError) as caught:
        load_catalogue(**{OPTION[name]: path})
    expected = {"rename": header[1], "drop": header[2], "reorder": "order", "extra": "comment"}[damage]
    assert_one_line_error(caught.value, str(path), OPTION[name], "header", expected)


@pytest.mark.parametrize(
    ("name", "key", "field", "value"),
    [
        (GPUS_CSV, "h100-sxm-80gb", "memory_usable_mib", "-5"),
        (GPUS_CSV, "h100-sxm-80gb", "memory_usable_mib", "eighty"),
        (GPUS_CSV, "h100-sxm-80gb", "vendor", "intel"),
        (GPUS_CSV, "h100-sxm-80gb", "fp8_supported", "maybe"),
        (GPUS_CSV, "h100-sxm-80gb", "name", "H100"),
        (GPUS_CSV, "h100-sxm-80gb", "gpus_per_node", "0"),
        (OFFERINGS_CSV, "aws/p5.48xlarge", "price_usd_per_hour", "-1"),
        (OFFERINGS_CSV, "aws/p5.48xlarge", "price_date", "last week"),
        (OFFERINGS_CSV, "aws/p5.48xlarge", "num_gpus", "0"),
        (ARCHITECTURES_CSV, "llama-3.1-8b", "num_layers", "0"),
        (ARCHITECTURES_CSV, "llama-3.1-8b", "mlp_kind", "relu"),
        (ARCHITECTURES_CSV, "llama-3.1-8b", "dropout_prob", "1.5"),
    ],
)
def test_bad_value_is_one_line_error(name, key, field, value, tmp_path):
    header, rows = read_rows(name)
    for row in rows:
        row_key = f"{row['provider']}/{row['instance_type']}" if name == OFFERINGS_CSV else row["name"]
        if row_key == key:
            row[field] = value
            break
    else:
        pytest.fail(f"{key} not in {name}")
    path = write_rows(tmp_path / f"bad-{name}", header, rows)
    with pytest.raises(VramplanError) as caught:
        load_catalogue(**{OPTION[name]: path})
    assert_one_line_error(caught.value, str(path), field, value)
    line = 2 + [i for i, r in enumerate(rows) if r[field] == value][0]
    assert f"line {line}" in str(caught.value)


@pytest.mark.parametrize("field", ["source", "memory_usable_mib"])
def test_empty_required_cell_is_one_line_error(field, tmp_path):
    header, rows = read_rows(GPUS_CSV)
    rows[0][field] = ""
    path = write_rows(tmp_path / "gpus.csv", header, rows)
    with pytest.raises(VramplanError) as caught:
        load_catalogue(gpus_csv=path)
    assert_one_line_error(caught.value, str(path), field)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_duplicate_name_is_one_line_error(name, tmp_path):
    header, rows = read_rows(name)
    rows.append(dict(rows[0]))
    key = f"{rows[0]['provider']}/{rows[0]['instance_type']}" if name == OFFERINGS_CSV else rows[0]["name"]
    path = write_rows(tmp_path / f"dup-{name}", header, rows)
    with pytest.raises(VramplanError) as caught:
        load_catalogue(**{OPTION[name]: path})
    assert_one_line_error(caught.value, str(path), "duplicate", key)


def test_offering_of_unknown_gpu_is_one_line_error(tmp_path):
    header, rows = read_rows(OFFERINGS_CSV)
    rows[3]["gpu"] = "h100-sxm-81gb"
    path = write_rows(tmp_path / "offerings.csv", header, rows)
    with pytest.raises(VramplanError) as caught:
        load_catalogue(offerings_csv=path)
    assert_one_line_error(caught.value, str(path), "h100-sxm-81gb", f"{rows[3]['provider']}/{rows[3]['instance_type']}")


def test_missing_user_csv_is_one_line_error(tmp_path):
    path = tmp_path / "absent.csv"
    with pytest.raises(VramplanError) as caught:
        load_catalogue(gpus_csv=path)
    assert_one_line_error(caught.value, str(path), "gpus_csv")


def test_empty_user_csv_is_one_line_error(tmp_path):
    path = tmp_path / "empty.csv"
    path.write_text("", encoding="utf-8")
    with pytest.raises(VramplanError) as caught:
        load_catalogue(models_csv=path)
    assert_one_line_error(caught.value, str(path), "models_csv")


def test_whole_row_check_names_the_column_and_value(tmp_path):
    header, rows = read_rows(GPUS_CSV)
    rows[0]["fp8_supported"] = "true"
    rows[0]["fp8_dense_tflops"] = "0"
    path = write_rows(tmp_path / "gpus.csv", header, rows)
    with pytest.raises(VramplanError) as caught:
        load_catalogue(gpus_csv=path)
    assert_one_line_error(caught.value, str(path), "line 2", "fp8_supported=True", "fp8_dense_tflops")


def test_error_line_is_the_file_line_not_the_row_count(tmp_path):
    header, rows = read_rows(GPUS_CSV)
    rows[1]["memory_usable_mib"] = "-5"
    path = write_rows(tmp_path / "gpus.csv", header, rows[:2])
    text = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join([text[0], text[1], "", text[2]]) + "\n", encoding="utf-8")  # a blank line 3
    with pytest.raises(VramplanError) as caught:
        load_catalogue(gpus_csv=path)
    assert_one_line_error(caught.value, "line 4", "memory_usable_mib='-5'")


def test_row_with_too_many_cells_is_one_line_error(tmp_path):
    header, rows = read_rows(GPUS_CSV)
    path = write_rows(tmp_path / "gpus.csv", header, rows[:1])
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text(lines[0] + "\n" + lines[1] + ",extra\n", encoding="utf-8")
    with pytest.raises(VramplanError) as caught:
        load_catalogue(gpus_csv=path)
    assert_one_line_error(caught.value, "line 2", "more cells than the header")


def test_model_directory_with_config_json(catalogue, tmp_path):
    model_dir = tmp_path / "Llama-3.1-8B"
    model_dir.mkdir()
    source = Path(__file__).parent / "fixtures" / "hf_configs" / "llama-3.1-8b.json"
    (model_dir / "config.json").write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    arch = catalogue.architecture(str(model_dir))
    assert arch.name == "llama-3.1-8b" and count_params(arch).total == 8_030_261_248


def test_architecture_and_job_hashes_agree_with_equality() -> None:
    """Architecture and Job hash a few fields (the functools caches of models/ hash them hundreds
    of thousands of times a batch): equal values must still hash alike, and values that differ
    only outside those fields must stay distinct keys."""
    from vramplan.models.core.setup import Job

    arch = load_catalogue().architectures["llama-3.1-8b"]
    twin = type(arch).model_validate(arch.model_dump())
    deeper = arch.model_copy(update={"num_layers": arch.num_layers + 1})
    assert twin is not arch and twin == arch and hash(twin) == hash(arch)
    assert deeper != arch and {arch: 1, deeper: 2, twin: 3} == {arch: 3, deeper: 2}
    job, other = Job(seq_len=4096), Job(seq_len=4096, lora_rank=8)
    assert Job(seq_len=4096) == job and hash(Job(seq_len=4096)) == hash(job)
    assert other != job and len({job: 1, other: 2, Job(seq_len=4096): 3}) == 2
