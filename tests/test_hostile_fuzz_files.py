"""Property-based fuzzing of the inputs that are files: a hostile config.json, and any run's
effect on the files around it (issue 33: "exit code in {0, 1, 2, 3}, one stderr line, no file
changed but the named outputs").

- config.json: every key of the llama family set to a hostile value (another type, a huge or
  negative number, text holding a marker), keys removed, unknown keys added. `estimate` answers
  (0, 3) or refuses in one line (2), and the line never holds the marker (a file passed as
  --model may hold anything: an error names the file, the key and the value's kind).
- Files: a folder holding a config, a catalogue, a jobs sheet and an unrelated file; a command
  whose outputs (-o, --report, --plot) are drawn from those paths and fresh ones. Whatever it
  answers, every file it did not name as an output is byte for byte as before, and a named
  output that is one of the run's inputs is refused (exit 2) with the input intact.

Budgets are fixed and derandomised as in tests/test_hostile_fuzz.py (VRAMPLAN_FUZZ_EXAMPLES=N
explores with N random examples)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from helpers.cli import invoke
from hypothesis import event, given
from hypothesis import strategies as st
from test_hostile_fuzz import budget

MARKER = "SECRET-7f3a"  # what a hostile file holds; no error may show it
TINY_LLAMA = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 172, "num_attention_heads": 4,
              "num_hidden_layers": 2, "num_key_value_heads": 2, "vocab_size": 1000, "max_position_embeddings": 256,
              "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False, "rms_norm_eps": 1e-5,
              "rope_theta": 10000.0, "attention_dropout": 0.0, "sliding_window": None}
HOSTILE_VALUE = st.one_of(
    st.sampled_from([MARKER, f"{MARKER}\x1b[2J", [MARKER], {"k": MARKER}, None, True, False, 0, -1, 2**63, 10**400,
                     1e308, -0.0, 0.5, "", "64", [64], float("1e-300")]),
    st.integers(-10**6, 10**6),
    st.text(max_size=6).map(lambda text: MARKER + text),
)


def _config(changes: dict, removed: list[str], extra: dict) -> dict:
    config = {key: value for key, value in TINY_LLAMA.items() if key not in removed}
    return {**config, **changes, **extra}


@budget(60)
@given(changes=st.dictionaries(st.sampled_from(sorted(TINY_LLAMA)), HOSTILE_VALUE, max_size=2),
       removed=st.lists(st.sampled_from(sorted(TINY_LLAMA)), max_size=1),
       extra=st.dictionaries(st.sampled_from(["quantization_config", "text_config", "num_local_experts", MARKER]),
                             HOSTILE_VALUE, max_size=1))
def test_a_hostile_config_json_answers_or_is_one_line_without_its_values(tmp_path_factory, changes, removed, extra):
    folder = tmp_path_factory.mktemp("model")
    # json.dumps writes 10**400 as a 401-digit integer and 1e308 as a float: what a file can hold
    (folder / "config.json").write_text(json.dumps(_config(changes, removed, extra)), encoding="utf-8")
    result = invoke("estimate", "--model", str(folder), "--gpu", "h100-sxm-80gb", "--seq-len", "128")
    event(f"exit {result.exit_code}")
    assert result.exit_code in (0, 2, 3), (result.exit_code, result.output, result.exception)
    assert len(result.stderr.splitlines()) <= 1 and "Traceback" not in result.output, result.stderr
    assert MARKER not in result.stderr, result.stderr
    assert "\x1b" not in result.output


# --- files: nothing changes but the named outputs -----------------------------------------------

INPUTS = {"config.json": json.dumps(TINY_LLAMA), "jobs.csv": "model,seq_len\ngpt2-124m,512\n",
          "notes.txt": "the user's own file\n"}
OUTPUT_NAMES = ["plan.json", "plan.csv", "plan.txt", "page.html", "m.png", "config.json", "jobs.csv", "notes.txt",
                "offerings.csv", "out.xlsx", ".hidden", "Gemfile"]


def _snapshot(folder: Path) -> dict[str, str]:
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in folder.iterdir() if path.is_file()}


def _prepare(folder: Path) -> None:
    from helpers.catalogue import packaged_rows

    for name, text in INPUTS.items():
        (folder / name).write_text(text, encoding="utf-8")
    header, rows = packaged_rows("offerings.csv")
    lines = [",".join(header)] + [",".join(json.dumps(row[c]) if "," in row[c] else row[c] for c in header)
                                  for row in rows]
    (folder / "offerings.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "Gemfile.lock").write_text("a lock the user owns\n", encoding="utf-8")


@budget(40)
@given(command=st.sampled_from(["estimate", "solve", "batch"]),
       outputs=st.dictionaries(st.sampled_from(["-o", "--report", "--plot"]), st.sampled_from(OUTPUT_NAMES),
                               min_size=1, max_size=3),
       catalogue=st.booleans())
def test_no_file_changes_but_the_named_outputs(tmp_path_factory, command, outputs, catalogue):
    folder = tmp_path_factory.mktemp("files")
    _prepare(folder)
    read = {"config.json"} | ({"offerings.csv"} if catalogue else set())
    args = {"estimate": ["estimate", "--model", str(folder / "config.json"), "--gpu", "h100-sxm-80gb"],
            "solve": ["solve", "--model", str(folder / "config.json"), "--seq-len", "128", "--max-gpus", "2",
                      "--time-limit", "2"],
            "batch": ["batch", str(folder / "jobs.csv"), "--workers", "1", "-q"]}[command]
    if command == "batch":
        read = {"jobs.csv"} | ({"offerings.csv"} if catalogue else set())
        outputs = {"-o": outputs.get("-o", "out.xlsx")}  # batch has one output
    if catalogue:
        args += ["--offerings-csv", str(folder / "offerings.csv")]
    if command == "estimate":
        outputs.pop("--report", None)  # estimate has no report
    for option, name in outputs.items():
        args += [option, str(folder / name)]
    before = _snapshot(folder)
    result = invoke(*args)
    event(f"{command} exit {result.exit_code}")
    assert result.exit_code in (0, 1, 2, 3), (result.exit_code, result.output, result.exception)
    assert len(result.stderr.splitlines()) <= 1, result.stderr
    named = set(outputs.values())
    clashes = named & read or len(named) < len(outputs)
    if clashes:
        assert result.exit_code == 2, (args, result.stderr)
    after = _snapshot(folder)
    changed = {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}
    assert changed <= (set() if clashes else named), (args, changed, result.stderr)
