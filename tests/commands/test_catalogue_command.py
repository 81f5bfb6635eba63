"""`vramplan catalogue import skypilot DIR` and `vramplan catalogue check FILE` (issue 34)."""

from __future__ import annotations

import csv
import io

from helpers.cli import invoke, one_line_error
from helpers.paths import CATALOGUE_DIR

# Rows in the form of skypilot-org/skypilot-catalog catalogs/v8/lambda/vms.csv (@0f407038): a CPU
# row, an 8 x H100 in three regions at two prices, two accelerators vramplan has no GPU for (P100,
# Quadro RTX 6000) and a B200 instance type no shipped row names.
LAMBDA = """InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice
cpu_4x_general,,,4.0,16.0,0.2,us-east-1,,
gpu_8x_h100_sxm5,H100,8.0,208.0,1800.0,23.92,us-east-1,,
gpu_8x_h100_sxm5,H100,8.0,208.0,1800.0,24.50,europe-central-1,,
gpu_8x_h100_sxm5,H100,8.0,208.0,1800.0,23.92,us-west-1,,
gpu_1x_p100,P100,1.0,14.0,100.0,1.09,us-east-1,,
gpu_1x_quadro,RTX6000,1.0,64.0,432.0,1.49,us-east-1,,
gpu_8x_b200_new,B200,8.0,208.0,2900.0,39.92,us-east-1,,
"""


def _import(tmp_path, *extra: str):
    (tmp_path / "v8" / "lambda").mkdir(parents=True)
    (tmp_path / "v8" / "lambda" / "vms.csv").write_text(LAMBDA, encoding="utf-8")
    date = () if "--price-date" in extra else ("--price-date", "2026-12-05")  # an option is given once
    return invoke("catalogue", "import", "skypilot", str(tmp_path / "v8"), *date, *extra)


def test_import_keeps_the_cheapest_regions_and_the_shipped_facts(tmp_path, catalogue):
    result = _import(tmp_path)
    assert result.exit_code == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [r["instance_type"] for r in rows] == ["gpu_8x_h100_sxm5"]
    (row,) = rows
    shipped = catalogue.offering("lambda/gpu_8x_h100_sxm5")
    assert (row["gpu"], row["num_gpus"], float(row["price_usd_per_hour"]), float(row["host_memory_gib"])) == (
        "h100-sxm-80gb", "8", 23.92, 1800.0)
    assert row["regions"] == "us-east-1;us-west-1" and row["price_date"] == "2026-12-05"
    assert float(row["network_bandwidth_gb_per_s"]) == shipped.network_bandwidth_gb_per_s  # SkyPilot has none
    assert "skypilot-org/skypilot-catalog lambda/vms.csv" in row["source"]
    report = result.stderr.splitlines()
    assert report[0] == "imported 1 offerings from lambda"
    assert "skipped 2: accelerator" not in result.stderr  # one line per reason
    assert any(line.startswith("skipped 2: accelerator") is False and "P100 is not in the GPU catalogue" in line
               for line in report)
    assert any(line.startswith("skipped 1: network unknown") and "gpu_8x_b200_new" in line for line in report)


def test_an_imported_file_is_a_catalogue(tmp_path):
    out = tmp_path / "imported.csv"
    assert _import(tmp_path, "-o", str(out)).exit_code == 0
    checked = invoke("catalogue", "check", str(out))
    assert checked.exit_code == 0 and checked.stdout == f"{out}: 1 offerings rows, valid\n"
    solved = invoke("solve", "--model", "llama-3.1-8b", "--seq-len", "4096", "--offerings-csv", str(out), "--format", "json")
    assert solved.exit_code == 0 and '"lambda/gpu_8x_h100_sxm5"' in solved.stdout


def test_check_names_the_first_bad_cell_and_the_stale_prices(tmp_path):
    assert invoke("catalogue", "check", str(CATALOGUE_DIR / "gpus.csv")).exit_code == 0
    stale = invoke("catalogue", "check", str(CATALOGUE_DIR / "offerings.csv"), env={"VRAMPLAN_TODAY": "2027-12-01"})
    assert stale.exit_code == 0 and "prices older than 90 days" in stale.stderr
    bad = tmp_path / "offerings.csv"
    lines = (CATALOGUE_DIR / "offerings.csv").read_text(encoding="utf-8").splitlines()
    bad.write_text("\n".join([lines[0], lines[1].replace(",8,", ",0,", 1)]) + "\n", encoding="utf-8")
    assert "line 2, num_gpus" in one_line_error(invoke("catalogue", "check", str(bad)))
    other = tmp_path / "notes.csv"
    other.write_text("a,b\n1,2\n", encoding="utf-8")
    assert "matches none of" in one_line_error(invoke("catalogue", "check", str(other)))


def test_import_refuses_what_is_not_a_skypilot_directory(tmp_path):
    assert "holds no <cloud>/vms.csv" in one_line_error(invoke("catalogue", "import", "skypilot", str(tmp_path)))
    assert "is not a directory" in one_line_error(invoke("catalogue", "import", "skypilot", str(tmp_path / "none")))
    assert "price_date" in one_line_error(_import(tmp_path, "--price-date", "yesterday"))


def test_import_never_writes_over_a_file_it_reads_and_takes_calendar_dates_up_to_today(tmp_path):
    """-o onto the cloud's own vms.csv replaced it with the offerings (exit 0; the next import read 0
    rows); 2026-02-30 and 2099-01-01 were accepted and wrote rows that catalogue check refuses."""
    (tmp_path / "v8" / "lambda").mkdir(parents=True)
    source = tmp_path / "v8" / "lambda" / "vms.csv"
    source.write_text(LAMBDA, encoding="utf-8")
    line = one_line_error(invoke("catalogue", "import", "skypilot", str(tmp_path / "v8"), "-o", str(source)))
    assert "output=" in line and "cloud file" in line
    assert source.read_text(encoding="utf-8") == LAMBDA
    for date, why in (("2026-02-30", "is not a calendar date"), ("2099-01-01", "is after today")):
        line = one_line_error(invoke("catalogue", "import", "skypilot", str(tmp_path / "v8"), "--price-date", date))
        assert f"price_date='{date}'" in line and why in line


def test_importing_the_lambda_snapshot_reproduces_the_shipped_lambda_rows(tmp_path, catalogue):
    """tests/catalogues/fixtures/skypilot/lambda/vms.csv: the us-east-1 rows of
    skypilot-org/skypilot-catalog catalogs/v8/lambda/vms.csv @0f407038 (its SOURCE.md). Every GPU
    instance type comes back as the shipped row: GPU, count, price and host RAM."""
    from helpers.paths import REPO

    result = invoke("catalogue", "import", "skypilot", str(REPO / "tests" / "catalogues" / "fixtures" / "skypilot"),
                    "--price-date", "2026-11-30")
    assert result.exit_code == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert len(rows) == 17 and result.stderr.splitlines() == ["imported 17 offerings from lambda"]
    for row in rows:
        shipped = catalogue.offering(f"lambda/{row['instance_type']}")
        assert (row["gpu"], int(row["num_gpus"]), float(row["price_usd_per_hour"]), float(row["host_memory_gib"])) == (
            shipped.gpu, shipped.num_gpus, shipped.price_usd_per_hour, shipped.host_memory_gib), row["instance_type"]


def test_rows_beyond_the_catalogues_ranges_are_skipped_not_written(tmp_path):
    """A third hostile review (2026-12-07): `inf` or 1e308 prices, `inf` host RAM and 1e9 GPUs were
    imported with exit 0 into a file `catalogue check` then refused; an `inf` count was `internal
    error: OverflowError`. Each is now a skipped instance type with its reason."""
    header = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice\n"
    rows = {"gpu_8x_h100_sxm5": "H100,8.0,208.0,inf,1e308,us-east-1,,inf",  # the shipped row's type: host RAM from it
            "gpu_1x_h100_pcie": "H100,inf,26.0,200.0,2.49,us-east-1,,",
            "gpu_1x_a100_sxm4": "A100,1e9,30.0,200.0,1.29,us-east-1,,"}
    (tmp_path / "v8" / "lambda").mkdir(parents=True)
    (tmp_path / "v8" / "lambda" / "vms.csv").write_text(header + "".join(f"{name},{cells}\n" for name, cells in rows.items()),
                                                       encoding="utf-8")
    out = tmp_path / "imported.csv"
    result = invoke("catalogue", "import", "skypilot", str(tmp_path / "v8"), "--price-date", "2026-12-05", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines()[0] == "imported 0 offerings from lambda"
    assert "price_usd_per_hour=1e+308 is out of the catalogue's range" in result.stderr
    assert "not a whole number of GPUs (inf): lambda/gpu_1x_h100_pcie" in result.stderr
    assert "num_gpus=1000000000 is out of the catalogue's range" in result.stderr
    assert invoke("catalogue", "check", str(out)).exit_code == 0  # what it wrote, the catalogue takes
