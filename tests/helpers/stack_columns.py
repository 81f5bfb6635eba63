"""A stacks.csv column every stack names, with the code that runs it cited in each row's source."""

from __future__ import annotations

from vramplan.models.catalogue.catalogue import load_stacks


def assert_stack_column(column: str, expected: dict[str, str]) -> None:
    """Each stack's value of `column` is `expected`'s, and every real stack's source cites it."""
    stacks = load_stacks()
    if "litgpt" in expected:  # lit-gpt up to v0.5.7: litgpt's recipe (its row's source is litgpt's, prefixed)
        expected = {**expected, "litgpt-fsdp1": expected["litgpt"]}
    if "torchtitan" in expected:  # torchtitan before 83e6941 (#1094): torchtitan's recipe, its root unit apart
        expected = {**expected, "torchtitan-root-fsdp": expected["torchtitan"]}
    assert {name: getattr(row, column) for name, row in stacks.items()} == expected
    assert all(column in row.source for name, row in stacks.items() if name != "custom")
