"""Spreadsheet I/O shared by batch and fleet: reading sheets, rows and their answer cells, the journal, the safe output writer, formats."""
