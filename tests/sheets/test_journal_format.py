"""The resume journal, format 2 (sheets/journal.py, docs/batch.md): every line carries the checksum
of its content and the header the catalogues' hashes. --resume refuses a journal it cannot trust
whole with one line naming the journal and the line (before: a UnicodeDecodeError, TypeError or
RecursionError traceback, or the rows of another format reused), keeps a torn last line's
neighbours, and solves every row again when the catalogues changed since the journal was written."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from helpers.cli import assert_error_line, invoke_batch
from helpers.paths import CATALOGUE_DIR
from helpers.sheets import FAST, read_rows, write_csv

from vramplan.models.catalogue.catalogue import load_catalogue
from vramplan.sheets import journal as batch_journal

ROWS = [{"id": "a", "model": "llama-3.1-8b", "seq_len": "2048", **FAST},
        {"id": "b", "model": "llama-3.1-8b", "seq_len": "4096", **FAST}]
FAKE = {"status": "infeasible", "explanation": "from the journal"}  # no solve gives this: it can only be reused


def checksum(record: dict) -> str:
    """The checksum docs/batch.md documents: sha256 of the record's canonical JSON, 16 hex digits."""
    text = json.dumps(record, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:16]


def summed(record: dict) -> bytes:
    return (json.dumps({**record, "sum": checksum(record)}) + "\n").encode("ascii")


def key_of(row: dict[str, str]) -> str:
    """The resume key of a row of ROWS (a catalogue model: its cells and the job they parse to)."""
    return batch_journal.row_key(list(row.values()), batch_journal.parse_outcome(row))


def write_journal(path: Path, catalogues: dict[str, str] | None = None, trust_output: bool = False) -> Path:
    journal = batch_journal.Journal(path, fresh=True, trust_output=trust_output, catalogues=catalogues)
    journal.append(0, key_of(ROWS[0]), dict(FAKE))
    journal.close()
    return path


def test_every_line_carries_the_checksum_of_its_content(tmp_path):
    catalogues = {"gpus-csv": "0123456789abcdef"}
    path = write_journal(tmp_path / "plans.csv.partial.jsonl", catalogues)
    lines = [json.loads(line) for line in path.read_text(encoding="ascii").splitlines()]
    for line in lines:
        assert line.pop("sum") == checksum(line)
    assert lines[0] == {"kind": "vramplan-batch-journal", "version": 2, "trust_output": False, "catalogue_hashes": catalogues}
    assert lines[1]["row"] == 0 and lines[1]["answer"]["explanation"] == "from the journal"
    header, entries = batch_journal.read_journal(path)
    assert header["catalogue_hashes"] == catalogues and [entry["row"] for entry in entries] == [0]


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _edit_answer(path: Path) -> None:
    lines = _lines(path)
    lines[1] = lines[1].replace(b"from the journal", b"from elsewhere")  # the checksum no longer matches
    path.write_bytes(b"".join(lines))


def _add(line: bytes):
    return lambda path: path.write_bytes(path.read_bytes() + line)


def _header(record: dict):
    return lambda path: path.write_bytes(b"".join([summed(record), *_lines(path)[1:]]))


ANSWER = {"status": "optimal"}
CORRUPTIONS = {  # name: (how the journal is spoilt, what the one line says)
    "not UTF-8": (_add(b'{"row": 1, "key": "\xff\xfe"}\n'), "line 3 is not UTF-8 text (edited or corrupt)"),
    "row as text": (_add(summed({"row": "x", "key": "k", "answer": ANSWER})), "line 3 is not a row of a journal"),
    "answer a number": (_add(summed({"row": 1, "key": "k", "answer": 5})), "line 3 is not a row of a journal"),
    "answer of wrong types": (_add(summed({"row": 1, "key": "k", "answer": {"status": "optimal", "num_gpus": "8"}})),
                              "line 3 is not a row of a journal"),
    "no checksum": (_add(b'{"row": "x", "key": "k", "answer": 5}\n'), "line 3 fails its checksum (edited or corrupt)"),
    "nested 100,000 deep": (_add(b"[" * 100_000 + b"]" * 100_000 + b"\n"), "line 3 is not JSON"),
    "an edited answer": (_edit_answer, "line 2 fails its checksum (edited or corrupt)"),
    "a torn line inside": (_add(b'{"row": 1, "ke\n' + summed({"row": 1, "key": "k", "answer": ANSWER})),
                           "line 3 is not JSON"),
    "not an object": (_add(b"[1, 2]\n"), "line 3 is not a journal record"),
    "foreign JSON lines": (lambda path: path.write_bytes(b'{"a": 1}\n{"b": 2}\n'),
                           "line 1 is not the header of a vramplan batch journal"),
    "format 1": (lambda path: path.write_bytes(
        b'{"kind": "vramplan-batch-journal", "version": 1, "trust_output": false}\n'
        b'{"row": 0, "key": "k", "answer": {"status": "optimal"}}\n'),
        "was written by an older vramplan (journal format 1"),
    "format 3": (_header({"kind": "vramplan-batch-journal", "version": 3, "trust_output": False, "catalogue_hashes": {}}),
                 "is a journal of format 3; this vramplan reads format 2"),
    "header without catalogues": (_header({"kind": "vramplan-batch-journal", "version": 2, "trust_output": False}),
                                  "line 1 is not the header of a vramplan batch journal"),
}


@pytest.mark.parametrize("case", CORRUPTIONS)
def test_resume_refuses_a_journal_it_cannot_trust_with_one_line(tmp_path, case):
    spoil, says = CORRUPTIONS[case]
    jobs, output = write_csv(tmp_path / "jobs.csv", ROWS), tmp_path / "plans.csv"
    journal = write_journal(batch_journal.journal_path(output))
    spoil(journal)
    before = journal.read_bytes()
    result = invoke_batch(str(jobs), "-o", str(output), "--resume")
    assert result.exit_code == 2, result.stderr
    assert_error_line(result, f"journal={str(journal)!r}: ", says, "move it away to start afresh")
    assert journal.read_bytes() == before and not output.exists()  # nothing solved, nothing touched


def test_a_torn_last_line_is_cut_off_and_the_complete_ones_reused(tmp_path):
    jobs, output = write_csv(tmp_path / "jobs.csv", ROWS), tmp_path / "plans.csv"
    journal = write_journal(batch_journal.journal_path(output), batch_journal.catalogue_hashes(load_catalogue()))
    _add(b'{"row": 1, "key": "k", "ans')(journal)  # killed mid-write
    result = invoke_batch(str(jobs), "-o", str(output), "--resume")
    assert result.exit_code == 3, result.stderr  # row a: the journal's (fake) infeasible answer
    assert "1 reused" in result.stderr
    assert [(row["status"], row["explanation"]) for row in read_rows(output)] == [
        ("infeasible", "from the journal"), ("optimal", "")]
    assert not journal.exists()


def test_an_empty_journal_is_started_afresh(tmp_path):
    """Killed between creating the journal and writing its header: nothing to keep, nothing to refuse."""
    jobs, output = write_csv(tmp_path / "jobs.csv", ROWS), tmp_path / "plans.csv"
    batch_journal.journal_path(output).write_bytes(b"")
    result = invoke_batch(str(jobs), "-o", str(output), "--resume")
    assert result.exit_code == 0, result.stderr
    assert [row["status"] for row in read_rows(output)] == ["optimal", "optimal"]


def test_changed_catalogues_solve_every_row_again_with_one_note(tmp_path):
    offerings = tmp_path / "offerings.csv"
    offerings.write_bytes((CATALOGUE_DIR / "offerings.csv").read_bytes())
    jobs, output = write_csv(tmp_path / "jobs.csv", ROWS), tmp_path / "plans.csv"
    assert invoke_batch(str(jobs), "-o", str(output), "--offerings-csv", str(offerings)).exit_code == 0
    journal = batch_journal.journal_path(output)
    hashes = batch_journal.catalogue_hashes(load_catalogue(offerings_csv=offerings))
    write_journal(journal, hashes, trust_output=True)
    same = invoke_batch(str(jobs), "-o", str(output), "--offerings-csv", str(offerings), "--resume")
    assert "2 reused" in same.stderr and "note:" not in same.stderr  # unchanged: the journal's answer is kept
    assert read_rows(output)[0]["explanation"] == "from the journal"

    write_journal(journal, hashes, trust_output=True)
    lines = offerings.read_text(encoding="utf-8").splitlines(keepends=True)
    offerings.write_text("".join(lines[:-1]), encoding="utf-8")  # one offering fewer: other answers may follow
    changed = invoke_batch(str(jobs), "-o", str(output), "--offerings-csv", str(offerings), "--resume")
    assert changed.exit_code == 0, changed.stderr
    notes = [line for line in changed.stderr.splitlines() if line.startswith("note:")]
    assert notes == [f"note: the catalogues (offerings-csv) changed since {journal} was written; "
                     "every row is solved again"]
    assert "0 reused" in changed.stderr  # neither the journal's rows nor the earlier output's
    assert [row["status"] for row in read_rows(output)] == ["optimal", "optimal"] and not journal.exists()


def test_after_changed_catalogues_the_earlier_output_is_no_longer_trusted(tmp_path, monkeypatch):
    """The journal started afresh must not vouch for the output beside it (solved with the old
    catalogues): a run that stops after one row leaves a journal with trust_output false."""
    from vramplan.batch import run as batch_run
    from vramplan.batch.backends import BatchError

    jobs, output = write_csv(tmp_path / "jobs.csv", ROWS), tmp_path / "plans.csv"
    assert invoke_batch(str(jobs), "-o", str(output)).exit_code == 0
    journal = write_journal(batch_journal.journal_path(output), {"gpus-csv": "not these"}, trust_output=True)

    def one_row_then_the_cluster_is_gone(catalogue, rows, options, progress=None, stop=None):
        yield 1, dict(FAKE)
        raise BatchError("the cluster is gone")

    monkeypatch.setattr(batch_run, "run_batch", one_row_then_the_cluster_is_gone)
    result = invoke_batch(str(jobs), "-o", str(output), "--resume", quiet=True)
    assert result.exit_code == 1 and "the 1 rows finished are kept" in result.stderr, result.stderr
    header, entries = batch_journal.read_journal(journal)
    assert header["trust_output"] is False and header["catalogue_hashes"] == batch_journal.catalogue_hashes(load_catalogue())
    assert [entry["row"] for entry in entries] == [1]
