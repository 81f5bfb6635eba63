"""Helpers shared by the tests: paths, the packaged catalogue, the command line, job sheets, random
solve queries and the fleet oracle's tiny fleets. Importable as `helpers` (pytest's pythonpath in
pyproject.toml has tests/)."""
