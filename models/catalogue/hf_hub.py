"""Hub ids (`Qwen/Qwen3-8B`) to their config.json through huggingface_hub: the config file only,
never weights. Honours HF_HUB_OFFLINE (then only the local cache is read, no network at all) and
HF_HUB_CACHE / HF_HOME (read here at call time, so a caller's environment always wins).
huggingface_hub is an optional dependency: `pip install 'vramplan[hub]'`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path

from vramplan.models.core.debug import debug_enabled
from vramplan.models.core.errors import CommandFailure, VramplanError

HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*/[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_TRUE = {"1", "on", "yes", "true"}


def looks_like_hub_id(text: str) -> bool:
    return bool(HUB_ID.match(text)) and ".." not in text and not text.endswith(".json")


def _cache_dir() -> str | None:
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return str(Path(os.environ["HF_HOME"]) / "hub")
    return None


@contextlib.contextmanager
def _hub_quiet() -> Iterator[None]:
    """huggingface_hub logs a warning per retry ("... thrown while requesting HEAD ...", "Retrying in
    1s [Retry 1/5]": 11 stderr lines when the hub cannot be reached); a failure here is one line."""
    logger = logging.getLogger("huggingface_hub")
    previous = logger.level
    logger.setLevel(logging.ERROR if not debug_enabled() else previous)
    try:
        yield
    finally:
        logger.setLevel(previous)


def hub_config_path(repo_id: str, revision: str | None = None) -> Path:
    """The local path of the repository's config.json, downloaded (config only) unless offline."""
    try:
        import huggingface_hub
    except ImportError:
        # a missing optional extra is the installation's failure (exit 1, docs/commands.md), not bad input
        raise CommandFailure(f"model={repo_id!r}: a hub id needs huggingface_hub: pip install 'vramplan[hub]'") from None
    cache_dir = _cache_dir()
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE:
        found = huggingface_hub.try_to_load_from_cache(repo_id, "config.json", cache_dir=cache_dir, revision=revision)
        if isinstance(found, str):
            return Path(found)
        raise VramplanError("model", repo_id, "HF_HUB_OFFLINE is set and its config.json is not in the hub cache")
    try:
        download = huggingface_hub.hf_hub_download  # imported lazily: its logging setup runs here, not inside
        with _hub_quiet():
            return Path(download(repo_id, "config.json", revision=revision, cache_dir=cache_dir))
    except Exception as error:  # noqa: BLE001 - every hub failure (network, 404, gated, auth) is one line
        reason = type(error).__name__
        raise VramplanError("model", repo_id, f"cannot fetch config.json from the Hugging Face hub ({reason})") from None
