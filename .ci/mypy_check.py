"""Type-check the package with mypy: models/ must be clean; elsewhere no error beyond the baseline.

The repository root is the package `vramplan` (setuptools package-dir), which mypy cannot see
through an editable install, so the check runs on a temporary folder holding a link named
`vramplan` to the root. An error is keyed by file, message and code (not line: lines move), and
counted: the baseline (.ci/mypy-baseline.txt) may only shrink.

    python .ci/mypy_check.py            # check (exit 1 on a new error, naming it)
    python .ci/mypy_check.py --update   # rewrite the baseline after fixing errors
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / ".ci" / "mypy-baseline.txt"
CLEAN = ("models/",)  # folders that must have no error at all
ERROR = re.compile(r"^(?P<path>[^:]+):\d+: error: (?P<message>.*)$")


def mypy_errors() -> Counter[str]:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "vramplan").symlink_to(ROOT)
        run = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                              "--no-incremental", "-p", "vramplan"],
                             cwd=folder, env={"MYPYPATH": folder, "PATH": "/usr/bin:/bin"},
                             capture_output=True, text=True)
    if run.returncode not in (0, 1) or "error: " not in run.stdout and run.returncode:
        sys.exit(f"mypy failed to run: {run.stderr.strip() or run.stdout.strip()}")
    found: Counter[str] = Counter()
    for line in run.stdout.splitlines():
        match = ERROR.match(line)
        if match:
            path = match["path"].split("vramplan/", 1)[-1]
            found[f"{path}: {match['message']}"] += 1
    return found


def main() -> int:
    found = mypy_errors()
    if "--update" in sys.argv:
        BASELINE.write_text("".join(f"{key}\n" * n for key, n in sorted(found.items())))
        print(f"mypy baseline: {sum(found.values())} errors written to {BASELINE.relative_to(ROOT)}")
        return 0
    baseline = Counter(BASELINE.read_text().splitlines()) if BASELINE.exists() else Counter()
    in_clean = [key for key in found if key.startswith(CLEAN)]
    new = found - baseline
    for key in sorted(set(in_clean) | set(new)):
        print(f"mypy: new error: {key}")
    fixed = sum((baseline - found).values())
    print(f"mypy: {sum(found.values())} errors, baseline {sum(baseline.values())}"
          + (f" ({fixed} fixed: run python .ci/mypy_check.py --update)" if fixed else ""))
    return 1 if in_clean or new else 0


if __name__ == "__main__":
    sys.exit(main())
