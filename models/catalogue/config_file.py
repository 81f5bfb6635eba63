"""Reading a Hugging Face config.json safely: which file a model argument names, and its JSON.

A model argument that is not a catalogue name may name a config.json (or its folder). Reading it
must not hang, exhaust memory, leak, or crash on a hostile file:

- only a regular file is read (a FIFO, a device or a socket is refused: the file is opened with
  O_NONBLOCK and checked with fstat before any read, so a FIFO never blocks);
- at most MAX_CONFIG_BYTES are read (a link to /dev/zero, a 1 GB file: refused);
- JSON nesting deeper than MAX_JSON_DEPTH, integers longer than MAX_INT_DIGITS digits,
  NaN/Infinity, and text that is not UTF-8 are refused;
- every count a config.json holds (layers, heads, widths, vocabulary) must be a whole number >= 1:
  `true` is not a count and `num_key_value_heads: 0` is not multi-head attention;
- errors name the file as the user wrote it and a fixed reason, never a value read from the file.

A `vramplan batch` sheet names files on behalf of whoever wrote the sheet, so there a path is
read only inside the models folder (`--models-dir`, default: the sheet's folder): a path that
resolves outside it (`../../secret.json`, an absolute path, a symlink pointing out) is refused
with the same message as a missing file, so that the answer reveals nothing about what exists
outside the folder. On the command line (`estimate`/`solve --model`) the path is the user's own
argument and may be anywhere.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from vramplan.models.core.errors import VramplanError

MAX_CONFIG_BYTES = 1 << 20  # 1 MiB; the largest published config.json files are a few tens of KiB
MAX_JSON_DEPTH = 32  # HF configs nest 2-4 levels (rope_scaling, quantization_config)
MAX_INT_DIGITS = 18  # every count fits in 18 digits; a 5,000-digit integer is refused before int()
CONFIG_NAME = "config.json"
# The tokens that decide nesting: an escape (two characters, so an escaped quote never ends a
# string), a quote, a bracket. Every alternative is one or two fixed characters, so the scan is
# linear; a string pattern ("...") rescanned from every quote of an unterminated string full of \"
# and took minutes on a 1 MiB file (the hostile-input review of 2026-12-06).
_NESTING_TOKENS = re.compile(r'\\.|["\[\]{}]', re.DOTALL)

# Keys that hold counts in the config.json of the supported families (transformers config classes).
COUNT_KEYS = (
    "num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
    "intermediate_size", "vocab_size", "max_position_embeddings", "num_local_experts", "num_experts_per_tok",
    "n_layer", "n_embd", "n_head", "n_inner", "n_positions",
)
OUTSIDE_REASON = ("no such config file inside the models folder (a sheet may only name config files under "
                  "--models-dir, default: the sheet's folder)")


def show_kind(value: Any) -> str:
    """What an error says of a value read from config.json: its kind, never the value itself (a
    file passed as --model may hold anything; the message names the file and the key)."""
    if value is None:
        return "<null>"
    if isinstance(value, bool):
        return "<a boolean>"
    if isinstance(value, (int, float)):
        return "<a number>"
    if isinstance(value, str):
        return f"<a text of {len(value)} characters>"
    if isinstance(value, list):
        return f"<a list of {len(value)}>"
    return "<an object>"


def _refuse(shown: str, reason: str) -> VramplanError:
    return VramplanError("model", shown if len(shown) <= 200 else shown[:197] + "...", reason)


def read_small_file(path: Path, field: str, shown: str, max_bytes: int) -> str:
    """The UTF-8 text of a regular file of at most `max_bytes` (a config.json, a catalogue CSV);
    errors are one VramplanError naming `field` and the file as `shown`."""
    try:
        return _read_bytes(Path(path), shown, max_bytes).decode("utf-8-sig")
    except UnicodeDecodeError:
        raise VramplanError(field, shown, "is not UTF-8 text") from None
    except VramplanError as error:
        raise VramplanError(field, shown, error.reason) from None


def _read_bytes(path: Path, shown: str, max_bytes: int = MAX_CONFIG_BYTES) -> bytes:
    """At most `max_bytes` of a regular file; never blocks on a FIFO, never reads a device."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise _refuse(shown, f"cannot read: {error.strerror or type(error).__name__}") from None
    except ValueError:  # an embedded NUL
        raise _refuse(shown, "cannot read: not a valid path") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _refuse(shown, "is not a regular file")
        too_big = f"is larger than {max_bytes / 2**20:g} MiB"
        if info.st_size > max_bytes:
            raise _refuse(shown, too_big)
        chunks, size = [], 0
        while size <= max_bytes:  # st_size may lie (procfs): read until EOF or the cap
            chunk = os.read(fd, max_bytes + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:
            raise _refuse(shown, too_big)
        return b"".join(chunks)
    except OSError as error:
        raise _refuse(shown, f"cannot read: {error.strerror or type(error).__name__}") from None
    finally:
        os.close(fd)


def json_depth(text: str) -> int:
    """The deepest nesting of arrays/objects in JSON text (brackets inside strings do not count)."""
    depth = deepest = 0
    in_string = False
    for token in _NESTING_TOKENS.finditer(text):
        c = token.group()
        if c == '"':
            in_string = not in_string
        elif in_string or len(c) == 2:
            continue
        elif c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _parse_int(shown: str):
    def parse(digits: str) -> int:
        if len(digits.lstrip("-")) > MAX_INT_DIGITS:
            raise _refuse(shown, f"holds an integer longer than {MAX_INT_DIGITS} digits")
        return int(digits)

    return parse


def _no_constants(shown: str):
    def parse(name: str) -> Any:
        raise _refuse(shown, f"holds {name}, which is not standard JSON")

    return parse


def check_counts(config: dict[str, Any], shown: str) -> None:
    """Every count key present (and not null) is a whole number >= 1; booleans are not counts."""
    for key in COUNT_KEYS:
        value = config.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise _refuse(shown, f"{key} must be a whole number >= 1 (true/false, 0, fractions and text are not "
                                 f"counts)")


def read_config_json(path: Path, shown: str | None = None) -> dict[str, Any]:
    """The JSON object of a config.json, read within the limits above. `shown` is how errors name
    the file (default: the path as given)."""
    shown = str(path) if shown is None else shown
    data = _read_bytes(Path(path), shown)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise _refuse(shown, "is not UTF-8 text") from None
    if json_depth(text) > MAX_JSON_DEPTH:
        raise _refuse(shown, f"nests JSON deeper than {MAX_JSON_DEPTH} levels")
    try:
        config = json.loads(text, parse_int=_parse_int(shown), parse_constant=_no_constants(shown))
    except json.JSONDecodeError as error:
        raise _refuse(shown, f"not valid JSON: {error.msg} at line {error.lineno}") from None
    except RecursionError:
        raise _refuse(shown, f"nests JSON deeper than {MAX_JSON_DEPTH} levels") from None
    if not isinstance(config, dict):
        raise _refuse(shown, "config.json must be a JSON object")
    check_counts(config, shown)
    return config


def _kind(path: Path) -> str:
    """'dir', 'file' (anything else that exists) or 'missing'; never raises (too long, loops...)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return "missing"
    return "dir" if stat.S_ISDIR(mode) else "file"


def looks_like_path(text: str) -> bool:
    return "/" in text or "\\" in text or text.endswith(".json") or text in (".", "..")


def config_path(text: str, models_dir: Path | None = None) -> Path | None:
    """The config.json a model argument names, or None when it names no file (then it is an unknown
    catalogue name). With `models_dir` (a batch sheet) the file must resolve inside that folder:
    anything else raises the same VramplanError as a missing file."""
    if models_dir is None:
        path = Path(text)
        kind = _kind(path)
        if kind == "dir":
            return path / CONFIG_NAME
        return path if kind == "file" or text.endswith(".json") else None
    base = Path(os.path.realpath(models_dir))
    try:
        path = Path(os.path.realpath(base / text))
    except (OSError, ValueError):
        raise _refuse(Path(text).name, OUTSIDE_REASON) from None
    if _kind(path) == "dir":
        path = Path(os.path.realpath(path / CONFIG_NAME))
    inside = path == base or base in path.parents
    if inside and _kind(path) != "missing":
        return path
    if looks_like_path(text) or not inside:
        raise _refuse(Path(text).name or text, OUTSIDE_REASON)
    return None
