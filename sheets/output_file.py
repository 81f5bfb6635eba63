"""Where every command writes its outputs, without ever destroying a file.

Every output of every command goes through here: estimate/solve/listings `-o`, `--report`,
`--plot`, batch `-o` (and its journal), fleet `-o`, `--pools-out` and `--plot` (docs/commands.md
"Output files").

- Before any work, claim_outputs() refuses an output that is a file the run reads (a model
  config.json, a catalogue CSV, the jobs sheet, the inventory, the journal) or that is another
  output of the same run (exit 2, naming the option and the path).
- A regular file or a new path is replaced atomically: the bytes go to a temporary file in the
  same folder (`.<name>.vramplan-tmp-<pid>`), fsynced, then renamed over it. A symlink is
  resolved first, so the file it points to is replaced and the link stays a link.
- Anything else that exists (a character device such as /dev/null or /dev/stdout, a FIFO, a
  pipe behind /proc/self/fd/1, a socket) is written directly, never replaced, and gets neither a
  journal nor a lock beside it (no files are created in /dev).
- An output that is a file the run reads (the jobs, a catalogue CSV, the journal) is refused.
- A batch or fleet output is locked for the whole run (fcntl.flock on `.<name>.vramplan-lock`
  beside it), so a second run on the same output stops with one line (exit 1). The lock is created
  exclusively and holds a mark; a run removes only a lock it created, or the marked lock of a run
  killed with -9 (which it took over). A file of that name without the mark is refused, never
  removed.
- A temporary file left by a batch killed with -9 during the final write is removed by the next
  batch on the same output (it holds the lock, so no other writer can own one); SIGTERM/SIGHUP
  during the write are turned into an exception so the temporary file is removed at once.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import stat
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from vramplan.models.core.errors import CommandFailure, VramplanError

TEMP_MARK = ".vramplan-tmp-"
LOCK_MARK = ".vramplan-lock"
LOCK_CONTENT = b"vramplan output lock: a run is writing the file beside this one\n"


@dataclass(frozen=True)
class OutputTarget:
    """The path the user gave and what writing to it means."""

    given: Path
    real: Path  # symlinks resolved: the file that is replaced (or the special file written)
    special: bool  # exists and is not a regular file: written directly, no journal, no lock

    @property
    def lock_path(self) -> Path:
        return self.real.with_name(f".{self.real.name}{LOCK_MARK}")

    def temporary(self) -> Path:
        return self.real.with_name(f".{self.real.name}{TEMP_MARK}{os.getpid()}")


def _refuse_packaged(path: Path, real: Path, option: str) -> None:
    """No output goes into the packaged catalogues' folder, which every run reads (exit 2): in a source
    checkout it is the working tree's catalogues/, where `stacks -o catalogues/stacks.csv` broke every
    later command."""
    from vramplan.models.catalogue.catalogue import packaged_folder

    folder = packaged_folder()
    if folder in real.parents:
        raise VramplanError(option, str(path), f"is in vramplan's packaged catalogues folder ({folder}), which "
                                               "every run reads; write to another file")


def output_target(path: Path, option: str = "output") -> OutputTarget:
    """Classify the output path; a folder, or a path whose folder does not exist, is one line naming
    `option` (the option it was given as: output, plot, report...), and so is a path in the
    packaged catalogues folder (_refuse_packaged). A folder or a packaged catalogue is bad input
    (exit 2), the same for every output option: a folder was exit 1 for `batch -o` and `gpus -o`
    but exit 2 (click's own check) for `fleet -o`, `--plot`, `--report` and `--launch-config`. A
    missing folder is a write that cannot happen, as a full disk or no permission (exit 1,
    docs/batch.md "Output safety")."""
    try:
        mode = os.stat(path).st_mode  # follows symlinks: /proc/self/fd/1 is the pipe itself
    except FileNotFoundError:
        real = Path(os.path.realpath(path))  # a new file, or the target of a dangling symlink
        if not real.parent.is_dir():
            raise CommandFailure(f"{option}={str(path)!r}: cannot write: folder {str(real.parent)!r} "
                                 "does not exist") from None
        _refuse_packaged(path, real, option)
        return OutputTarget(path, real, special=False)
    except OSError as error:
        raise CommandFailure(f"{option}={str(path)!r}: cannot write: {error.strerror or error}") from None
    if stat.S_ISDIR(mode):
        raise VramplanError(option, str(path), "cannot write: it is a folder; name a file")
    if stat.S_ISREG(mode):
        real = Path(os.path.realpath(path))
        _refuse_packaged(path, real, option)
        return OutputTarget(path, real, special=False)
    return OutputTarget(path, path, special=True)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): compare where they would be
        return os.path.realpath(a) == os.path.realpath(b)


def _is_temporary_of(target: OutputTarget, path: Path) -> bool:
    """Whether `path` is a name remove_stale_temporaries() deletes for this output."""
    real = Path(os.path.realpath(path))
    return real.parent == target.real.parent and real.name.startswith(f".{target.real.name}{TEMP_MARK}")


def refuse_inputs(target: OutputTarget, inputs: Iterable[tuple[str, Path | None]], journal: Path | None,
                  option: str = "output") -> None:
    """The output must not be a file the run reads, and no input may be a file the run writes or
    deletes beside the output: its journal, its lock file or one of its temporary names (exit 2)."""
    if target.special:
        return  # a device or a pipe is not a file anyone reads back
    for name, path in inputs:
        if path is None:
            continue
        if _same_file(target.given, path):
            raise VramplanError(option, str(target.given), f"is the {name} file itself; write to another file")
        if journal is not None and _same_file(journal, path):
            raise VramplanError(option, str(target.given), f"has its journal at {str(journal)!r}, which is the "
                                                           f"{name} file; write to another file")
        if _same_file(target.lock_path, path) or _is_temporary_of(target, path):
            raise VramplanError(option, str(target.given), f"would remove {str(path)!r} (its lock or temporary "
                                                           f"file), which is the {name} file; write to another file")


def claim_outputs(outputs: Sequence[tuple[str, Path | None]],
                  inputs: Sequence[tuple[str, Path | None]]) -> list[OutputTarget | None]:
    """Every output of one run (option name, path or None), checked before any work: none may be a
    file the run reads, nor the same file as another output of the run (exit 2, naming both
    options). Two devices or pipes may coincide (`--plot /dev/null -o /dev/null`)."""
    targets: list[OutputTarget | None] = []
    claimed: list[tuple[str, OutputTarget]] = []
    for option, path in outputs:
        if path is None:
            targets.append(None)
            continue
        target = output_target(path, option)
        refuse_inputs(target, inputs, None, option)
        for other_option, other in claimed:
            if not (target.special and other.special) and _same_file(target.real, other.real):
                raise VramplanError(option, str(path), f"is also this run's --{other_option} file; "
                                                       "give each output its own file")
        claimed.append((option, target))
        targets.append(target)
    return targets


HELD = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)  # flock's errnos for a lock another process holds


def _held(target: OutputTarget) -> CommandFailure:
    return CommandFailure(f"output={str(target.given)!r}: another vramplan run is writing it "
                          f"(lock {str(target.lock_path)!r} is held); wait for it to finish")


class OutputLock:
    """An exclusive flock on `.<output>.vramplan-lock` for the whole run; removed when released.

    The lock file is created exclusively (O_EXCL) with LOCK_CONTENT in it. One that exists already
    is taken over only when nobody holds it and it is a vramplan lock (the mark, or empty: a run
    that has created it and not yet written the mark); anything else is refused with one line."""

    def __init__(self, target: OutputTarget) -> None:
        self.path = target.lock_path
        self._fd: int | None = None
        while self._fd is None:
            created = True
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            except FileExistsError:
                created = False
                try:
                    fd = os.open(self.path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
                except FileNotFoundError:  # its holder removed it meanwhile: create it again
                    continue
                except OSError as error:
                    raise CommandFailure(f"output={str(target.given)!r}: cannot open the lock file "
                                         f"{str(self.path)!r}: {error.strerror or error}") from None
            except OSError as error:
                raise CommandFailure(f"output={str(target.given)!r}: cannot create the lock file "
                                     f"{str(self.path)!r}: {error.strerror or error}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                os.close(fd)
                if error.errno in HELD:
                    raise _held(target) from None
                raise CommandFailure(f"output={str(target.given)!r}: cannot lock {str(self.path)!r}: "
                                     f"{error.strerror or error}") from None
            try:  # the holder before us may have removed the file after we opened it: lock the live one
                live = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                live = False
            if not live:
                os.close(fd)
                continue
            if created:
                os.write(fd, LOCK_CONTENT)
            elif os.pread(fd, len(LOCK_CONTENT) + 1, 0) not in (LOCK_CONTENT, b""):
                os.close(fd)
                raise CommandFailure(f"output={str(target.given)!r}: {str(self.path)!r} exists and is not a "
                                     "vramplan lock; move it away or write to another file")
            self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()
            os.close(self._fd)
            self._fd = None


def refuse_held_output(target: OutputTarget) -> None:
    """One line when another run holds the output's lock now (checked before what that run leaves
    beside the output, its journal, is taken for an unfinished run's: `add --resume` was wrong)."""
    if target.special:
        return
    try:
        fd = os.open(target.lock_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return  # no lock (or none we can read): OutputLock says what it finds
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno in HELD:
            raise _held(target) from None
    finally:
        os.close(fd)


@contextlib.contextmanager
def lock_output(target: OutputTarget) -> Iterator[None]:
    """Hold the output's lock (nothing for a special file), and clear temporaries of killed runs."""
    if target.special:
        yield
        return
    lock = OutputLock(target)
    try:
        remove_stale_temporaries(target)
        yield
    finally:
        lock.release()


def remove_stale_temporaries(target: OutputTarget) -> list[Path]:
    """Temporary files of earlier runs on this output (only one run holds the lock: ours)."""
    removed = []
    for path in target.real.parent.glob(f".{target.real.name}{TEMP_MARK}*"):
        with contextlib.suppress(OSError):
            path.unlink()
            removed.append(path)
    return removed


class _Killed(BaseException):
    """SIGTERM/SIGHUP arrived during the final write."""


@contextlib.contextmanager
def _signals_raise() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise _Killed(signum)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def write_text_output(target: OutputTarget, text: str) -> None:
    """write_output() of UTF-8 text."""
    write_output(target, text.encode("utf-8"))


def write_output(target: OutputTarget, data: bytes) -> None:
    """Write the whole output: atomically over a regular file or a new path, directly otherwise."""
    try:
        if target.special:
            with os.fdopen(_open_special(target), "wb") as handle:  # a device or pipe, never replaced
                handle.write(data)
            return
        _write_atomically(target, data)
    except OSError as error:
        raise CommandFailure(f"output={str(target.given)!r}: cannot write: {error.strerror or error}") from None


FIFO_READER_WAIT_S = 10.0


def _open_special(target: OutputTarget) -> int:
    """A write descriptor of a device or pipe. A FIFO that no process reads is waited for at most
    FIFO_READER_WAIT_S, then one line: a plain open() blocked forever, after every row was solved."""
    deadline = time.monotonic() + FIFO_READER_WAIT_S
    while True:
        try:
            fd = os.open(target.given, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as error:
            if error.errno != errno.ENXIO:  # ENXIO: a FIFO without a reader
                raise
            if time.monotonic() >= deadline:
                raise CommandFailure(f"output={str(target.given)!r}: cannot write: no process is reading this "
                                     f"FIFO (waited {FIFO_READER_WAIT_S:g} s); start its reader first") from None
            time.sleep(0.1)
            continue
        os.set_blocking(fd, True)
        return fd


def _write_atomically(target: OutputTarget, data: bytes) -> None:
    temporary = target.temporary()
    killed: _Killed | None = None
    try:
        with _signals_raise():
            try:
                with open(temporary, "xb") as handle:  # noqa: PTH123
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                with contextlib.suppress(OSError):  # keep the mode of the file we replace
                    os.chmod(temporary, stat.S_IMODE(os.stat(target.real).st_mode))
                os.replace(temporary, target.real)
            except _Killed as signalled:
                killed = signalled
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()
    if killed is not None:
        signum = killed.args[0]
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)  # die of the signal as the user asked, the temporary gone
