"""Job sheets (CSV, JSON lines, XLSX, Parquet) written for `vramplan batch` and `vramplan fleet`,
and the CSV answers read back."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

FAST = {"gpus": "h100-sxm-80gb", "max_gpus": "8"}  # one GPU type, at most 8 GPUs: a row solves in ~10 ms


def write_csv(path: Path, rows: list[dict[str, Any]] | list[list[Any]], header: list[str] | None = None, *,
              lineterminator: str = "\r\n", errors: str = "strict") -> Path:
    """Rows as dicts (the header defaults to their keys in first-seen order; a key a row lacks is an
    empty cell) or as lists under `header`."""
    if header is None:
        header = list(dict.fromkeys(key for row in rows for key in row))
    with path.open("w", encoding="utf-8", newline="", errors=errors) as handle:
        if rows and not isinstance(rows[0], dict):
            writer = csv.writer(handle, lineterminator=lineterminator)
            writer.writerow(header)
        else:
            writer = csv.DictWriter(handle, fieldnames=header, lineterminator=lineterminator)
            writer.writeheader()
        writer.writerows(rows)
    return path


def write_sheet(path: Path, rows: Any) -> Path:
    """A job sheet in the format its suffix names: .csv (see write_csv), .jsonl (one record a line),
    .xlsx or .parquet (rows: a pandas DataFrame or a list of dicts, without the index)."""
    if path.suffix == ".csv":
        return write_csv(path, rows)
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        return path
    import pandas

    frame = rows if isinstance(rows, pandas.DataFrame) else pandas.DataFrame(rows)
    if path.suffix == ".xlsx":
        frame.to_excel(path, index=False)
    elif path.suffix == ".parquet":
        frame.to_parquet(path, index=False)
    else:
        raise ValueError(f"no sheet format for {path.name}")
    return path


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """An answer CSV's header and rows (its UTF-8 byte order mark dropped)."""
    with path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


def read_rows(path: Path) -> list[dict[str, str]]:
    """An answer CSV's rows."""
    return read_csv(path)[1]


# --- the batch tests' rows ------------------------------------------------------------------------

GOOD = {"model": "llama-3.1-8b", "seq_len": "2048", "objective": "cost", **FAST}
HEADER = ["id", "model", "seq_len", "objective", "gpus", "max_gpus", "global_batch", "tokens", "zero"]
BAD_ROWS = [  # (id, changes to a good row, the text the error must contain)
    ("unknown-model", {"model": "llama-9000"}, "model='llama-9000'"),
    ("abc-seq", {"seq_len": "abc"}, "seq_len='abc'"),
    ("negative-seq", {"seq_len": "-5"}, "seq_len='-5'"),
    ("fastest", {"objective": "fastest"}, "objective='fastest'"),
    ("empty-model", {"model": ""}, "model=''"),
    ("zero-batch", {"global_batch": "0"}, "global_batch='0'"),
    ("huge-tokens", {"tokens": "1e400"}, "tokens='1e400'"),
]


def job(id_: str, **cells: str) -> dict[str, str]:
    """A good row (llama-3.1-8b at 2048 tokens on at most 8 H100s) with its id and `cells` changed."""
    return {"id": id_, **GOOD, **cells}
