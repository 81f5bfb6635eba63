"""Text from the user's files is shown as it is: no rich markup ('[red]x' printed as 'x'), no
mathtext in pictures ('$\\foo$' in a name crashed every picture), no raw control characters on the
terminal (a name holding ESC [2J cleared the screen)."""

from __future__ import annotations

import pytest
from helpers.cli import invoke

from vramplan.commands.literal import literal

CONFIG = ('{"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4, '
          '"intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 2048}')


def _model(tmp_path, name: str) -> str:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(CONFIG, encoding="utf-8")
    return str(folder)


def test_a_name_in_brackets_is_not_markup(tmp_path):
    result = invoke("estimate", "--model", _model(tmp_path, "[red]x"), "--gpu", "h100-sxm-80gb")
    assert result.exit_code in (0, 3) and result.stdout.startswith("[red]x (")


def test_a_dollar_name_is_drawn_not_parsed(tmp_path):
    pytest.importorskip("matplotlib")
    picture = tmp_path / "m.png"
    result = invoke("estimate", "--model", _model(tmp_path, "m$\\foo$"), "--gpu", "h100-sxm-80gb", "--plot", str(picture))
    assert result.exit_code in (0, 3), result.stderr
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_control_characters_are_shown_escaped(tmp_path):
    assert literal("a\x1b[2Jb\tc\x9b") == "a\\x1b[2Jb\tc\\x9b"
    result = invoke("estimate", "--model", _model(tmp_path, "bad\x1b[2Jname"), "--gpu", "h100-sxm-80gb")
    assert "\x1b" not in result.stdout
    assert "bad\\x1b[2jname (" in result.stdout  # names are case-insensitive: shown lower-case


def test_the_report_and_pictures_hold_no_raw_control_characters(tmp_path):
    """A name holding ESC and BEL reached the HTML page raw, and matplotlib printed a 'Glyph 27
    missing' warning per picture on stderr."""
    pytest.importorskip("matplotlib")
    report, picture = tmp_path / "r.html", tmp_path / "m.svg"
    model = _model(tmp_path, "a\x1b[2Jb\x07")
    result = invoke("solve", "--model", model, "--seq-len", "512", "--max-gpus", "8", "--report", str(report),
                    "--plot", str(picture))
    assert result.exit_code == 0 and result.stderr == ""
    page = report.read_text(encoding="utf-8")
    assert not any(character in page for character in "\x1b\x07") and "a\\x1b[2jb\\x07" in page
    assert "\x1b" not in picture.read_text(encoding="utf-8")
