"""The cost model: exact bytes, seconds and dollars of one plan, plain Python (no solver, no CLI).

Subpackages, imports flowing one way: core <- architecture <- {catalogue, memory} <- time <- estimate.py.
"""
