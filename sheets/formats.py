"""The sheet formats the batch and fleet commands read and write: a constant their --help lists
without importing the sheet machinery (sheets/sheet_files.py)."""

FORMATS = ("csv", "xlsx", "parquet", "jsonl")
