"""Where the tests find the repository's files, wherever a test module sits below tests/."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent  # the repository root: the vramplan package itself
CATALOGUE_DIR = REPO / "catalogues"
EXAMPLES = REPO / "examples"
HF_CONFIGS = TESTS / "fixtures" / "hf_configs"
DOCS = REPO / "docs"
DOC_FILES = [REPO / "README.md", *sorted(DOCS.glob("*.md"))]  # the pages whose commands and links are checked
