"""The user-CSV path (docs/design.md section 6): users substitute their own gpus, offerings or models
CSV with the packaged schema, and every bad CSV is a one-line VramplanError naming the file and
the field or value.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.catalogue import assert_one_line_message, packaged_rows
from helpers.paths import CATALOGUE_DIR
from helpers.sheets import write_csv
from pydantic import BaseModel

from vramplan.models.architecture.params import count_params
from vramplan.models.catalogue.catalogue import ARCHITECTURES_CSV, GPUS_CSV, OFFERINGS_CSV, load_catalogue
from vramplan.models.core.catalogue_schema import Architecture, GpuSpec, Offering
from vramplan.models.core.errors import VramplanError

SCHEMAS: dict[str, type[BaseModel]] = {GPUS_CSV: GpuSpec, OFFERINGS_CSV: Offering, ARCHITECTURES_CSV: Architecture}
# load_catalogue keyword for each file
OPTION = {GPUS_CSV: "gpus_csv", OFFERINGS_CSV: "offerings_csv", ARCHITECTURES_CSV: "models_csv"}


def write_rows(path: Path, header: list[str], rows: list[dict[str, str]]) -> Path:
    return write_csv(path, rows, header, lineterminator="\n")


# --- the user-CSV path ---------------------------------------------------------------------------


def test_user_gpu_csv_adds_a_private_gpu(tmp_path, catalogue):
    header, rows = packaged_rows(GPUS_CSV)
    private = dict(rows[[r["name"] for r in rows].index("h100-sxm-80gb")])
    private.update(name="acme-x1-96gb", memory_marketed_gb="96", memory_usable_mib="97000",
                   source="our own nvidia-smi, 2026-12-01")
    path = write_rows(tmp_path / "my_gpus.csv", header, rows + [private])
    mine = load_catalogue(gpus_csv=path)
    assert mine.gpu("acme-x1-96gb").memory_usable_mib == 97000
    assert mine.gpu("h100-sxm-80gb") == catalogue.gpu("h100-sxm-80gb")


def test_user_gpu_csv_replaces_the_packaged_one(tmp_path):
    """A file replaces, not merges: a GPU-only file plus offerings for it is a whole catalogue."""
    header, rows = packaged_rows(GPUS_CSV)
    only = [dict(r) for r in rows if r["name"] == "l4-24gb"]
    gpus = write_rows(tmp_path / "gpus.csv", header, only)
    o_header, o_rows = packaged_rows(OFFERINGS_CSV)
    offerings = write_rows(tmp_path / "offerings.csv", o_header, [r for r in o_rows if r["gpu"] == "l4-24gb"])
    catalogue = load_catalogue(gpus_csv=gpus, offerings_csv=offerings)
    assert list(catalogue.gpus) == ["l4-24gb"]
    assert {o.gpu for o in catalogue.offerings.values()} == {"l4-24gb"}


def test_user_offerings_csv_negotiated_price(tmp_path):
    header, rows = packaged_rows(OFFERINGS_CSV)
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
    header, rows = packaged_rows(ARCHITECTURES_CSV)
    tiny = dict(rows[[r["name"] for r in rows].index("llama-3.1-8b")])
    tiny.update(name="tiny-llama", num_layers="2", hidden_size="256", num_attention_heads="4", num_kv_heads="2",
                head_dim="64", intermediate_size="512", vocab_size="1000", source="made up for a test")
    catalogue = load_catalogue(models_csv=write_rows(tmp_path / "arch.csv", header, [tiny]))
    assert list(catalogue.architectures) == ["tiny-llama"]
    assert count_params(catalogue.architecture("tiny-llama")).total > 0


def test_user_csv_with_bom_and_crlf_loads(tmp_path, catalogue):
    text = (CATALOGUE_DIR / GPUS_CSV).read_text(encoding="utf-8")
    path = tmp_path / "excel.csv"
    path.write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode("utf-8"))
    assert load_catalogue(gpus_csv=path).gpus == catalogue.gpus


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_columns_may_come_in_any_order(name, tmp_path):
    """The header is read by name: a catalogue with its columns in another order loads the same."""
    header, rows = packaged_rows(name)
    path = write_rows(tmp_path / name, list(reversed(header)), rows)
    assert load_catalogue(**{OPTION[name]: path}) == load_catalogue()


def test_an_offerings_file_without_the_optional_columns_loads(tmp_path, catalogue):
    """A user's offerings.csv written before regions, commitments and links existed still loads."""
    header, rows = packaged_rows("offerings.csv")
    old = [c for c in header if c in ("provider", "instance_type", "gpu", "num_gpus", "price_usd_per_hour",
                                      "spot_price_usd_per_hour", "host_memory_gib", "network_bandwidth_gb_per_s",
                                      "price_date", "source")]
    path = write_rows(tmp_path / "offerings.csv", old, [{k: r[k] for k in old} for r in rows])
    assert set(load_catalogue(offerings_csv=path).offerings) == set(catalogue.offerings)


# --- bad user CSVs: one-line VramplanError naming the file and the field or value ---------------


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@pytest.mark.parametrize("damage", ["rename", "drop", "repeat", "extra"])
def test_wrong_header_is_one_line_error(name, damage, tmp_path):
    header, rows = packaged_rows(name)
    bad = list(header)
    if damage == "rename":
        bad[1] = bad[1] + "_typo"
        rows = [{(bad[1] if k == header[1] else k): v for k, v in r.items()} for r in rows]
    elif damage == "drop":
        bad.remove(header[2])
        rows = [{k: v for k, v in r.items() if k != header[2]} for r in rows]
    elif damage == "repeat":
        bad.append(bad[0])
    else:
        bad.append("comment")
    path = write_rows(tmp_path / f"bad-{name}", bad, rows)
    with pytest.raises(VramplanError) as caught:
        load_catalogue(**{OPTION[name]: path})
    expected = {"rename": header[1], "drop": header[2], "repeat": "repeated", "extra": "comment"}[damage]
    assert_one_line_message(caught.value, str(path), OPTION[name], "header", expected)


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
        (OFFERINGS_CSV, "aws/p5.48xlarge", "price_date", "2026-13-45"),  # internal ValueError before
        (OFFERINGS_CSV, "aws/p5.48xlarge", "price_date", "2027-06-01"),  # after today (pinned 2026-12-05)
        (OFFERINGS_CSV, "aws/p5.48xlarge", "num_gpus", "0"),
        (ARCHITECTURES_CSV, "llama-3.1-8b", "num_layers", "0"),
        (ARCHITECTURES_CSV, "llama-3.1-8b", "mlp_kind", "relu3"),
        (ARCHITECTURES_CSV, "llama-3.1-8b", "dropout_prob", "1.5"),
    ],
)
def test_bad_value_is_one_line_error(name, key, field, value, tmp_path):
    header, rows = packaged_rows(name)
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
    assert_one_line_message(caught.value, str(path), field, value)
    line = 2 + [i for i, r in enumerate(rows) if r[field] == value][0]
    assert f"line {line}" in str(caught.value)


@pytest.mark.parametrize("field", ["source", "memory_usable_mib"])
def test_empty_required_cell_is_one_line_error(field, tmp_path):
    header, rows = packaged_rows(GPUS_CSV)
    rows[0][field] = ""
    path = write_rows(tmp_path / "gpus.csv", header, rows)
    with pytest.raises(VramplanError) as caught:
        load_catalogue(gpus_csv=path)
    assert_one_line_message(caught.value, str(path), field)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_duplicate_name_is_one_line_error(name, tmp_path):
    header, rows = packaged_rows(name)
    rows.append(dict(rows[0]))
    key = f"{rows[0]['provider']}/{rows[0]['instance_type']}" if name == OFFERINGS_CSV else rows[0]["name"]
    path = write_rows(tmp_path / f"dup-{name}", header, rows)
    with pytest.raises(VramplanError) as caught:
        load_catalogue(**{OPTION[name]: path})
    assert_one_line_message(caught.value, str(path), "duplicate", key)


def test_offering_of_unknown_gpu_is_one_line_error(tmp_path):
    header, rows = packaged_rows(OFFERINGS_CSV)
    rows[3]["gpu"] = "h100-sxm-81gb"
    path = write_rows(tmp_path / "offerings.csv", header, rows)
    with pytest.raises(VramplanError) as caught:
        load_catalogue(offerings_csv=path)
    assert_one_line_message(caught.value, str(path), "h100-sxm-81gb", f"{rows[3]['provider']}/{rows[3]['instance_type']}")


def test_missing_user_csv_is_one_line_error(tmp_path):
    path = tmp_path / "absent.csv"
    with pytest.raises(VramplanError) as caught:
        load_catalogue(gpus_csv=path)
    assert_one_line_message(caught.value, str(path), "gpus_csv")


def test_empty_user_csv_is_one_line_error(tmp_path):
    path = tmp_path / "empty.csv"
    path.write_text("", encoding="utf-8")
    with pytest.raises(VramplanError) as caught:
        load_catalogue(models_csv=path)
    assert_one_line_message(caught.value, str(path), "models_csv")


def test_whole_row_check_names_the_column_and_value(tmp_path):
    header, rows = packaged_rows(GPUS_CSV)
    rows[0]["fp8_supported"] = "true"
    rows[0]["fp8_dense_tflops"] = "0"
    path = write_rows(tmp_path / "gpus.csv", header, rows)
    with pytest.raises(VramplanError) as caught:
        load_catalogue(gpus_csv=path)
    assert_one_line_message(caught.value, str(path), "line 2", "fp8_supported=True", "fp8_dense_tflops")


def test_error_line_is_the_file_line_not_the_row_count(tmp_path):
    header, rows = packaged_rows(GPUS_CSV)
    rows[1]["memory_usable_mib"] = "-5"
    path = write_rows(tmp_path / "gpus.csv", header, rows[:2])
    text = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join([text[0], text[1], "", text[2]]) + "\n", encoding="utf-8")  # a blank line 3
    with pytest.raises(VramplanError) as caught:
        load_catalogue(gpus_csv=path)
    assert_one_line_message(caught.value, "line 4", "memory_usable_mib='-5'")


def test_row_with_too_many_cells_is_one_line_error(tmp_path):
    header, rows = packaged_rows(GPUS_CSV)
    path = write_rows(tmp_path / "gpus.csv", header, rows[:1])
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text(lines[0] + "\n" + lines[1] + ",extra\n", encoding="utf-8")
    with pytest.raises(VramplanError) as caught:
        load_catalogue(gpus_csv=path)
    assert_one_line_message(caught.value, "line 2", "more cells than the header")

