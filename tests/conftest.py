"""Fixtures every test folder shares.

- `catalogue`: the packaged catalogue, loaded once per session (helpers/catalogue.py
  packaged_catalogue; module-level constants and parametrize lists call that directly). Tests
  that need a catalogue of their own (user CSVs, another object for the table memo) load one.

Helpers that tests call with arguments live in tests/helpers/ (importable as `helpers`: pytest's
pythonpath in pyproject.toml has tests/): the command line (cli.py), job sheets (sheets.py), the
repository's paths (paths.py), the catalogue files (catalogue.py), the solver oracle's random
queries (queries.py) and the fleet oracle's tiny fleets (fleets.py).
"""

from __future__ import annotations

import os

import pytest
from helpers.catalogue import packaged_catalogue

from vramplan.models.catalogue.catalogue import Catalogue

# Answers must not change with the day the suite runs: a catalogue price ages past
# models/estimate.py MAX_PRICE_AGE_DAYS and every plan would gain a warning (models/core/clock.py).
os.environ["VRAMPLAN_TODAY"] = "2026-12-05"


@pytest.fixture(scope="session")
def catalogue() -> Catalogue:
    """The packaged catalogue (gpus.csv, offerings.csv, architectures.csv), shared: never mutate it."""
    return packaged_catalogue()
