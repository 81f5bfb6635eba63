"""A digest of the answers to N seeded random queries (the CP-SAT vs brute-force oracle's queries,
tests/helpers/queries.py): one line per query, its seed and the sha256 of its SolveResult's JSON
with the search report's work and timings left out. Two builds answer alike when their digests
are equal line for line: what a change to the solver's core must keep (issue 35's "answers
identical on 1,000 seeded oracle queries").

    python bench/answer_digest.py --queries 1000 > after.txt
    PYTHONPATH=<a checkout's parent, the package as vramplan/> python bench/answer_digest.py ... > before.txt
    diff before.txt after.txt

`--without KEY` (repeatable) drops a key wherever it occurs in the answer before hashing: a field a
release adds (a new report figure, a new job option) would otherwise change every digest, which
then says nothing about the answers the builds share.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers.queries import random_query  # noqa: E402

from vramplan.models.catalogue.catalogue import load_catalogue  # noqa: E402
from vramplan.models.core.errors import VramplanError  # noqa: E402
from vramplan.solver.api import solve  # noqa: E402

# What depends on the machine or on how the answer was found, not on the answer.
_VOLATILE = ("search", "solve_time_s", "timings")


def _without(value, keys: frozenset[str]):
    if isinstance(value, dict):
        return {key: _without(item, keys) for key, item in value.items() if key not in keys}
    if isinstance(value, list):
        return [_without(item, keys) for item in value]
    return value


def digest(answer: dict, without: frozenset[str] = frozenset()) -> str:
    kept = {key: _without(value, without) for key, value in answer.items() if key not in _VOLATILE}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:16]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--without", action="append", default=[], metavar="KEY",
                        help="drop this key wherever it occurs before hashing (a field one build adds)")
    args = parser.parse_args(argv)
    catalogue = load_catalogue()
    for seed in range(args.first_seed, args.first_seed + args.queries):
        query = random_query(random.Random(seed))
        try:
            answer = json.loads(solve(catalogue, query).model_dump_json())
        except VramplanError as error:  # a query the generator draws that solve refuses (one line, as the CLI says it)
            print(seed, "refused", hashlib.sha256(str(error).encode()).hexdigest()[:16], flush=True)
            continue
        print(seed, answer["status"], digest(answer, frozenset(args.without)), flush=True)


if __name__ == "__main__":
    main()
