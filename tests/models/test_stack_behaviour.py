"""The stack behaviours (models/core/stack_behaviour.py) name real stacks, say where they are
modelled, and docs/stacks.md lists each: a behaviour added to the table without its module or its
documentation fails here."""

from __future__ import annotations

from pathlib import Path

from vramplan.models.catalogue.catalogue import load_stacks
from vramplan.models.core.stack_behaviour import BEHAVIOURS, describe

ROOT = Path(__file__).resolve().parents[2]


def test_each_behaviour_names_stacks_of_the_catalogue_and_the_module_that_models_it() -> None:
    stacks = set(load_stacks())
    for name, behaviour in BEHAVIOURS.items():
        assert behaviour.stacks and behaviour.stacks <= stacks - {"custom"}, name
        assert name in (ROOT / behaviour.modelled_in).read_text(), (name, behaviour.modelled_in)
        assert "custom" not in behaviour  # a stack of one's own shows no behaviour


def test_docs_list_every_behaviour() -> None:
    text = (ROOT / "docs" / "stacks.md").read_text()
    for name, behaviour in BEHAVIOURS.items():
        row = next(line for line in text.splitlines() if line.startswith(f"| `{name}` |"))
        assert row.split("|")[2].strip() == ", ".join(sorted(behaviour.stacks)), name
    assert len(describe().splitlines()) == len(BEHAVIOURS)
