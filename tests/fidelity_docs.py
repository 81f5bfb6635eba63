"""Rewrite docs/fidelity.md's two evidence tables and their coverage lines from the evidence as the
model predicts it now: `python tests/fidelity_docs.py`. The tables are what `python
tests/measured_peaks.py` and `python tests/measured_throughput.py` print (table, blank line,
coverage line); each replaces the table under its `| run |` header and the `Coverage:` line
above it in its section."""

from __future__ import annotations

from pathlib import Path

import measured_peaks
import measured_throughput

DOC = Path(__file__).parents[1] / "docs" / "fidelity.md"
SECTIONS = {"## Training stacks: measured peaks": measured_peaks, "## Training throughput: measured": measured_throughput}


def _rewrite(lines: list[str], heading: str, printed: str) -> list[str]:
    table, coverage = printed.rsplit("\n\n", 1)
    start = lines.index(heading)
    cover = next(i for i in range(start, len(lines)) if lines[i].startswith("Coverage:"))
    lines[cover] = "Coverage: " + coverage.strip()
    first = next(i for i in range(cover, len(lines)) if lines[i].startswith("| run |"))
    last = next(i for i in range(first, len(lines)) if not lines[i].startswith("|"))
    return lines[:first] + table.strip().splitlines() + lines[last:]


def main() -> None:
    lines = DOC.read_text(encoding="utf-8").splitlines()
    for heading, module in SECTIONS.items():
        lines = _rewrite(lines, heading, module.table())
    DOC.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
