"""The sheet formats the batch and fleet commands read and write: a constant their --help lists
without importing the sheet machinery (batch/sheet.py)."""

FORMATS = ("csv", "xlsx", "parquet", "jsonl")
