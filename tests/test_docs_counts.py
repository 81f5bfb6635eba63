"""The catalogue sizes README.md and docs/catalogues.md state are the packaged catalogues' (a second
hostile review, 2026-12-07: both said 37 architectures and 7 stacks where there were 39 and 10)."""

from __future__ import annotations

import re

import pytest
from helpers.paths import DOCS, REPO

from vramplan.models.catalogue.catalogue import load_catalogue, load_stacks


@pytest.mark.parametrize("page", [REPO / "README.md", DOCS / "catalogues.md"])
def test_the_stated_catalogue_sizes_are_the_catalogues(page):
    text = page.read_text(encoding="utf-8")
    catalogue = load_catalogue()
    providers = {o.provider for o in catalogue.offerings.values()} - {"list"}  # `list`: reference rows, no provider
    stated = {
        "gpus": re.search(r"\((\d+) GPUs\)|\((\d+) GPUs,", text),
        "offerings": re.search(r"(\d+)\s+(?:dated\s+offerings|rows)\s+of\s+(\d+)\s+providers", text),
        "architectures": re.search(r"(\d+)\s+architectures\s+with\s+exact\s+parameter\s+counts", text),
        "stacks": re.search(r"(\d+)\s+training-stack\s+presets", text),
    }
    assert all(stated.values()), {name: bool(found) for name, found in stated.items()}
    assert int(next(g for g in stated["gpus"].groups() if g)) == len(catalogue.gpus)
    assert (int(stated["offerings"][1]), int(stated["offerings"][2])) == (len(catalogue.offerings), len(providers))
    assert int(stated["architectures"][1]) == len(catalogue.architectures)
    assert int(stated["stacks"][1]) == len(load_stacks())
