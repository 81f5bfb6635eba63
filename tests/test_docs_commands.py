"""Every `vramplan ...` command the documentation shows is a command vramplan takes.

The commands are taken from the fenced code blocks of README.md and docs/*.md (shell-style: `\\`
continuations, `$ ` prompts, `&&`/`;`/`|` chains, `NAME=value` prefixes; `python ...` and `pip ...`
are not checked). The listings and `estimate` on a catalogue model are run through click's
CliRunner and must exit 0 or 3 (3: the plan does not fit, a legal answer). Every other command
(`solve`, `batch`, `fleet`, anything reading files) is parsed with click's own `make_context`,
in a temporary folder holding the examples' sheets, so an unknown option, a bad choice or a
missing required option fails, naming the file and the line. Usage synopses (`[--top K]`,
`--engine cpsat|brute`, `...`) are checked option by option: every option exists and every
alternative of a choice is one of its values.

(The README's length and the links of every page: tests/test_docs_links.py.)
"""

from __future__ import annotations

import difflib
import importlib.util
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from helpers.paths import DOC_FILES
from helpers.paths import REPO as ROOT

from vramplan.cli import main

SKIPPED_BLOCKS = {"python", "py", "pycon", "json", "jsonl", "csv", "toml", "yaml", "yml", "html", "diff"}
CHAIN_TOKENS = {"&&", "||", ";", "|", "&"}
RUN_COMMANDS = {"gpus", "models", "offerings", "stacks", "estimate"}
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*(=[A-Z][A-Z0-9_]*)?$")  # N, FILE, ADDR, PROVIDER=GPUS
PICTURE_OPTIONS = {"--plot", "--report"}
FILE_OPTIONS = {"--gpus-csv", "--offerings-csv", "--models-csv"}


@dataclass(frozen=True)
class DocCommand:
    path: Path
    line: int
    tokens: tuple[str, ...]  # what follows `vramplan`

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT).as_posix()}:{self.line}"

    def __str__(self) -> str:
        return f"{self.where}: vramplan {shlex.join(self.tokens)}"


# --- reading the documentation ------------------------------------------------------------------------


def fenced_blocks(text: str) -> list[tuple[str, list[tuple[int, str]]]]:
    """(info string, [(line number, line)]) of every fenced code block."""
    blocks: list[tuple[str, list[tuple[int, str]]]] = []
    fence: str | None = None
    info = ""
    lines: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if fence is None:
            match = re.match(r"^(`{3,}|~{3,})(.*)$", stripped)
            if match:
                fence, info, lines = match.group(1), match.group(2).strip(), []
        elif stripped.startswith(fence) and not stripped[len(fence):].strip(fence[0]).strip():
            blocks.append((info, lines))
            fence = None
        else:
            lines.append((number, line))
    return blocks


def logical_lines(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Lines with their `\\` continuations joined, `$ ` prompts removed, numbered by their first line."""
    joined: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, line in lines:
        text = line.strip()
        if pending is None and text.startswith("$ "):
            text = text[2:]
        if pending is not None:
            number, text = pending[0], pending[1] + " " + text
        if text.endswith("\\"):
            pending = (number, text[:-1].rstrip())
            continue
        pending = None
        joined.append((number, text))
    if pending is not None:
        joined.append(pending)
    return joined


def commands_in(path: Path) -> list[DocCommand]:
    found = []
    for info, lines in fenced_blocks(path.read_text(encoding="utf-8")):
        if info.split()[:1] and info.split()[0].lower() in SKIPPED_BLOCKS:
            continue
        for number, text in logical_lines(lines):
            if "vramplan" not in text:
                continue
            try:
                tokens = shlex.split(text, comments=True)
            except ValueError as error:
                raise AssertionError(f"{path.relative_to(ROOT)}:{number}: cannot split {text!r}: {error}") from None
            segment: list[str] = []
            for token in [*tokens, ";"]:
                if token not in CHAIN_TOKENS:
                    segment.append(token)
                    continue
                while segment and (segment[0] == "env" or ENV_ASSIGNMENT.match(segment[0])):
                    segment.pop(0)
                if segment and segment[0] == "vramplan":
                    found.append(DocCommand(path, number, tuple(segment[1:])))
                segment = []
    return found


ALL_COMMANDS = [command for path in DOC_FILES for command in commands_in(path)]


# --- checking one command -------------------------------------------------------------------------------


def group_context() -> click.Context:
    return click.Context(main, info_name="vramplan")


def is_synopsis(tokens: tuple[str, ...]) -> bool:
    return any(t.startswith("[") or t.endswith("]") or t == "..." or "|" in t for t in tokens)


def option_table(command: click.Command) -> dict[str, click.Parameter]:
    table: dict[str, click.Parameter] = {}
    for param in command.params:
        if isinstance(param, click.Option):
            for name in (*param.opts, *param.secondary_opts):
                table[name] = param
    for name in command.get_help_option_names(click.Context(command)):
        table.setdefault(name, click.Option([name], is_flag=True))
    return table


def takes_value(param: click.Parameter) -> bool:
    return not (isinstance(param, click.Option) and (param.is_flag or param.count))


def check_options(command: click.Command, args: list[str], synopsis: bool) -> tuple[list[str], list[tuple[click.Parameter, str]]]:
    """Problems with the options' names and choices, and the (option, value) pairs given."""
    options = option_table(command)
    problems: list[str] = []
    given: list[tuple[click.Parameter, str]] = []
    i = 0
    while i < len(args):
        token = args[i].strip("[]") if synopsis else args[i]
        i += 1
        if token in ("", "...") or not token.startswith("-") or token == "-" or re.match(r"^-\d", token):
            continue
        name, equals, value = token.partition("=") if token.startswith("--") else (token, "", "")
        names = name.split("|") if synopsis else [name]
        unknown = [n for n in names if n not in options]
        if unknown:
            for n in unknown:
                close = difflib.get_close_matches(n, list(options), n=3)
                problems.append(f"unknown option {n}" + (f" (did you mean {', '.join(close)}?)" if close else ""))
            continue
        param = options[names[0]]
        if not takes_value(param):
            continue
        if not equals:
            optional = getattr(param, "_flag_needs_value", False)  # click's optional value: `--compile` alone
            if i >= len(args) or (optional and args[i].startswith("-")):
                if not optional:
                    problems.append(f"option {name} needs a value")
                continue
            value = args[i].strip("[]") if synopsis else args[i]
            i += 1
        given.append((param, value))
        if isinstance(param.type, click.Choice):
            choices = [str(c) for c in param.type.choices]
            for alternative in value.split("|") if synopsis else [value]:
                if alternative in ("", "...") or PLACEHOLDER.match(alternative):
                    continue
                if alternative not in choices:
                    problems.append(f"{name} {alternative!r} is not one of {', '.join(choices)}")
    return problems, given


def positionals(command: click.Command, args: list[str]) -> list[tuple[click.Parameter, str]]:
    """The arguments (not options) given, paired with the command's click.Arguments in order."""
    options = option_table(command)
    values: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if token.startswith("-") and token != "-":
            param = options.get(token.partition("=")[0])
            if param is not None and takes_value(param) and "=" not in token:
                i += 1
            continue
        values.append(token)
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    return list(zip(arguments, values))


def prepare_files(command: click.Command, args: list[str], folder: Path, given: list[tuple[click.Parameter, str]]) -> list[str]:
    """Make every path the command requires to exist, inside `folder` (the examples' sheets are
    already there); an absolute path that does not exist is replaced by one that does."""
    args = list(args)
    for param, value in [*given, *positionals(command, args)]:
        kind = param.type
        if not isinstance(kind, click.Path) or not kind.exists or Path(value).exists():
            continue
        if Path(value).is_absolute():
            stand_in = folder / "stand-in" / Path(value).name
            args = [stand_in.as_posix() if a == value else a for a in args]
            target = stand_in
        else:
            target = folder / value
        target.parent.mkdir(parents=True, exist_ok=True)
        if kind.dir_okay and not kind.file_okay:
            target.mkdir(exist_ok=True)
        else:
            target.touch()
    return args


def runnable(name: str, args: list[str], given: list[tuple[click.Parameter, str]]) -> bool:
    """Cheap to run here: a listing, or an estimate of a catalogue model with packaged catalogues
    (pictures only when matplotlib is installed)."""
    if name not in RUN_COMMANDS or any(a in ("-h", "--help") for a in args):
        return False
    if any(a.partition("=")[0] in FILE_OPTIONS for a in args):
        return False
    if any(a.partition("=")[0] in PICTURE_OPTIONS for a in args) and importlib.util.find_spec("matplotlib") is None:
        return False
    if name == "estimate":
        models = [value for param, value in given if param.name == "model"]
        return bool(models) and "/" not in models[0] and not models[0].endswith(".json")
    return True


@pytest.fixture()
def sheet_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder holding the examples' sheets, at its top and under examples/."""
    (tmp_path / "examples").mkdir()
    for sheet in (ROOT / "examples").glob("*.csv"):
        shutil.copy(sheet, tmp_path / sheet.name)
        shutil.copy(sheet, tmp_path / "examples" / sheet.name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_documentation_shows_commands() -> None:
    names = {command.tokens[0] for command in ALL_COMMANDS if command.tokens}
    assert {"estimate", "solve", "batch", "fleet"} <= names, names
    readme = [command for command in ALL_COMMANDS if command.path.name == "README.md" and command.path.parent == ROOT]
    assert any(command.tokens[:1] == ("solve",) for command in readme), "README.md shows no `vramplan solve`"


@pytest.mark.parametrize("doc", ALL_COMMANDS, ids=lambda command: command.where)
def test_a_documented_command_is_one_vramplan_takes(doc: DocCommand, sheet_folder: Path) -> None:
    args = list(doc.tokens)
    if not args or args[0] in ("-h", "--help", "--version"):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, f"{doc}\nexit {result.exit_code}: {result.output}"
        return
    name = args[0]
    command = main.get_command(group_context(), name)
    assert command is not None, f"{doc}\nno command {name!r} (vramplan has {', '.join(main.list_commands(group_context()))})"
    synopsis = is_synopsis(doc.tokens[1:])
    problems, given = check_options(command, args[1:], synopsis)
    assert not problems, f"{doc}\n" + "\n".join(problems)
    if synopsis:
        return  # a usage synopsis: every option and choice is checked above
    if runnable(name, args[1:], given):
        result = CliRunner().invoke(main, args)
        assert result.exit_code in (0, 3), f"{doc}\nexit {result.exit_code}: {result.stderr or result.output}"
        return
    parsed = prepare_files(command, args[1:], sheet_folder, given)
    try:
        context = command.make_context(f"vramplan {name}", parsed, parent=group_context(), resilient_parsing=False)
    except click.exceptions.Exit as stop:  # --help and the like: fine if clean
        assert stop.exit_code == 0, f"{doc}\nexit {stop.exit_code}"
        return
    except click.ClickException as error:
        pytest.fail(f"{doc}\n{error.format_message()}")
    context.close()


# --- the checker catches what it claims to ----------------------------------------------------------------


@pytest.mark.parametrize(("text", "wanted"), [
    ("vramplan solve --model llama-3.1-8b --modle x", "unknown option --modle"),
    ("vramplan solve --model llama-3.1-8b --objective cheapest", "'cheapest' is not one of"),
    ("vramplan fleet jobs.csv --inventory inventory.csv -o s.csv [--objective cost|fastest]", "'fastest' is not one of"),
    ("vramplan batch jobs.csv -o plans.csv [--resume|--resumed]", "unknown option --resumed"),
    ("vramplan estimate --model llama-3.1-8b --gpu", "needs a value"),
])
def test_the_option_check_names_what_is_wrong(text: str, wanted: str) -> None:
    tokens = shlex.split(text)[1:]
    command = main.get_command(group_context(), tokens[0])
    problems, _ = check_options(command, tokens[1:], is_synopsis(tuple(tokens[1:])))
    assert any(wanted in problem for problem in problems), problems


def test_a_missing_required_option_fails_the_parse(sheet_folder: Path) -> None:
    command = main.get_command(group_context(), "batch")
    with pytest.raises(click.ClickException):
        command.make_context("vramplan batch", ["jobs.csv"], parent=group_context(), resilient_parsing=False)


def test_commands_are_read_like_a_shell(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```\n"
        "$ COLUMNS=80 vramplan solve --model llama-3.1-8b \\\n"
        "    --seq-len 4096 | less\n"
        "python -m pip install . && vramplan gpus --format csv  # a comment\n"
        "```\n"
        "```python\nvramplan.load_catalogue()  # vramplan gpus is not a shell command here\n```\n",
        encoding="utf-8",
    )
    found = [(c.line, c.tokens) for c in commands_in(page)]
    assert found == [(2, ("solve", "--model", "llama-3.1-8b", "--seq-len", "4096")), (4, ("gpus", "--format", "csv"))]
