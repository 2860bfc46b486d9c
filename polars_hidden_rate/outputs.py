"""Where results are written: one rule for every output path, the ways an output is written
(a file replaced atomically, a directory of parts staged beside its target), and the one step
that makes a finished output visible.

The rule (`check_output`): an output's folder exists; the output is no input, nor holds
one (by path once links are resolved, or by inode: hard links, bind mounts); and what is
already there is of the kind that will be written (a regular file for a file, a real directory
for a directory), never a FIFO, a socket or a device. It returns the identity of what is there,
the one thing the run may replace.

The step (`publish`): a complete output, staged beside its target, takes the target's
name atomically and exclusively. A run creates a target that was absent when it started, or
replaces the very file or directory it found then; if someone else created or replaced the
target meanwhile (another run, most often), it fails with `FileExistsError` and leaves
the target as the other left it.

The writers: `replace_atomically` writes a file in a private temporary folder beside it;
`staged_directory` gives a private directory beside a dataset output, which
`write_counted_part` fills with one part per originals file, the run's provenance in its
footer (the local path and the cluster's workers write the same parts, through it).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import secrets
import shutil
import stat
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Literal, NamedTuple

import polars as pl
from polars.exceptions import ComputeError

from polars_hidden_rate._types import CountArray

OutputKind = Literal["file", "directory"]
PART_PREFIX = "part-"


class Identity(NamedTuple):
    """What a path names, as the file system tells one entry from another."""

    device: int
    inode: int
    changed: int
    """The status change time (ns): an entry changed in place, or a new one that got a freed
    inode number, is not the one found."""

    def same_entry(self, other: Identity | None) -> bool:
        """Whether ``other`` is this entry, however it changed since (a rename changes it)."""
        return other is not None and (self.device, self.inode) == (other.device, other.inode)


class Access(NamedTuple):
    """Who may read an output: its permission bits and its group (None: the creator's)."""

    mode: int
    group: int | None


def identity(path: Path) -> Identity | None:
    """The entry ``path`` names itself (a link, not its target); None when there is none."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return None
    return Identity(found.st_dev, found.st_ino, found.st_ctime_ns)


def describe(mode: int) -> str:
    """What a file of this ``st_mode`` is, in words."""
    kinds = (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    return next((words for test, words in kinds if test(mode)), "a special file")


def check_output(
    path: Path,
    inputs: Mapping[str, Sequence[Path]],
    *,
    kind: OutputKind,
    name: str,
    overwrite: bool | None = None,
) -> Identity | None:
    """Refuse an output ``path`` that would lose an input or is not of ``kind``, and, with
    ``overwrite=False``, one that exists; return the identity of what is there (None when
    nothing is).

    ``inputs`` maps each role (``ORIGINALS``, ``originals``, ...) to its files; ``name`` is
    the option or argument the messages name (``--output``, ``output``).

    Raises
    ------
    FileNotFoundError
        When the folder that would hold ``path`` does not exist.
    ValueError
        When ``path`` is an input file, or a directory holding one.
    FileExistsError
        When something other than a ``kind`` is at ``path`` (see `existing`), or something
        is there and ``overwrite`` is False.
    """
    check_folder(path, name)
    for role, files in inputs.items():
        for source in files:
            if _is_or_holds(path, source):
                msg = (
                    f"{name} {str(path)!r} is or holds the input {str(source)!r} ({role}); "
                    "write it elsewhere"
                )
                raise ValueError(msg)
    found = existing(path, kind=kind, name=name)
    if found is not None and overwrite is False:
        msg = f"{name} {str(path)!r} exists; pass overwrite=True to replace it"
        raise FileExistsError(msg)
    return found


def check_folder(path: Path, name: str) -> None:
    """The folder that would hold ``path`` exists: FileNotFoundError naming ``name`` if not."""
    if not path.parent.is_dir():
        msg = f"{name} folder not found: {str(path.parent)!r}"
        raise FileNotFoundError(msg)


def existing(path: Path, *, kind: OutputKind, name: str) -> Identity | None:
    """The identity of what is at ``path``: nothing, or a ``kind`` (for a file, a regular file
    or a link to one, which is replaced as a link is; for a directory, a real one).

    Raises
    ------
    FileExistsError
        When something else is there (a FIFO, a socket, a device, a directory where a file is
        meant, ...), saying what it is: writing would replace it, or block on it.
    """
    try:
        found = os.stat(path) if kind == "file" else os.lstat(path)
    except FileNotFoundError:
        return identity(path)  # nothing, or a dangling link (replaced, as a link is)
    wanted = stat.S_ISREG if kind == "file" else stat.S_ISDIR
    if not wanted(found.st_mode):
        what = "a regular file" if kind == "file" else "a directory"
        msg = f"{name} {str(path)!r} exists and is {describe(found.st_mode)}, not {what}"
        raise FileExistsError(msg)
    return identity(path)


def _is_or_holds(output: Path, source: Path) -> bool:
    """Whether writing ``output`` would lose ``source``: one path once links are resolved, a
    folder above it, or the same inode as it or a folder above it (a hard link, a bind mount).
    """
    place, resolved = output.resolve(), source.resolve()
    if place == resolved or place in resolved.parents:
        return True
    try:
        found = os.stat(output)
    except OSError:  # nothing there: no inode to share
        return False
    for above in (source, *resolved.parents):
        try:
            other = os.stat(above)
        except OSError:
            continue
        if (other.st_dev, other.st_ino) == (found.st_dev, found.st_ino):
            return True
    return False


def ordinary_file_access(folder: Path) -> Access:
    """The mode an ordinary ``open`` gives a new file in ``folder`` (umask, default ACLs):
    read off an empty file created there and removed at once (the umask cannot be read
    without setting it, for every thread of the process)."""
    anonymous = _anonymous_file_access(folder)
    if anonymous is not None:
        return anonymous
    return _probe(
        folder,
        lambda probe: os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)),
        os.unlink,
    )


def _anonymous_file_access(folder: Path) -> Access | None:
    """The mode of a file created in ``folder`` without a name (Linux's ``O_TMPFILE``: the
    umask and default ACLs apply as to any new file), so that no stop, however timed, can
    leave it behind; None where the system or the file system has no such file."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None:
        return None
    try:
        descriptor = os.open(folder, flag | os.O_WRONLY, 0o666)
    except OSError as error:
        if error.errno in (*_UNSUPPORTED, errno.EISDIR):
            return None
        raise
    try:
        return Access(stat.S_IMODE(os.fstat(descriptor).st_mode), None)
    finally:
        os.close(descriptor)


def ordinary_directory_access(folder: Path) -> Access:
    """The mode an ordinary ``mkdir`` gives a new directory in ``folder``, as
    `ordinary_file_access` reads a file's."""
    return _probe(folder, lambda probe: os.mkdir(probe, 0o777), os.rmdir)


def _probe(
    folder: Path, create: Callable[[Path], object], delete: Callable[[Path], object]
) -> Access:
    """The mode of a probe that ``create`` makes in ``folder`` (exclusively), removed by
    ``delete`` however this ends: the creation is inside the ``try``, so that a stop signal
    arriving the instant after it (before any other statement) still removes it. A name
    someone else holds already (one chance in 2^48) fails, and is left to them."""
    probe = folder / f".{os.urandom(6).hex()}.probe"
    ours = True
    try:
        try:
            create(probe)
        except FileExistsError:
            ours = False
            raise
        return Access(stat.S_IMODE(os.stat(probe).st_mode), None)
    finally:
        if ours:
            _remove_despite_a_stop(lambda: delete(probe))


def _remove_despite_a_stop(remove_it: Callable[[], object]) -> None:
    """``remove_it()``, done even when a stop signal's exception interrupts it (it is then
    done again, and the stop goes on); a thing already gone is no error."""
    try:
        with contextlib.suppress(FileNotFoundError):
            remove_it()
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            remove_it()
        raise


def access_of(path: Path) -> Access:
    """The permission bits and group of ``path`` (a link's target)."""
    found = os.stat(path)
    return Access(stat.S_IMODE(found.st_mode), found.st_gid)


def narrowest(accesses: Sequence[Access], default: Access) -> Access:
    """An access no wider than any of ``accesses``: the bits they all share, their group when
    they share one (else no group bits at all); ``default`` when there are none."""
    if not accesses:
        return default
    mode = functools.reduce(lambda bits, access: bits & access.mode, accesses, 0o7777)
    groups = {access.group for access in accesses}
    if len(groups) == 1:
        return Access(mode, groups.pop())
    return Access(mode & ~0o070, None)


def grant(path: Path, access: Access) -> None:
    """Give ``path`` the mode and group of ``access``. A group this process may not give
    (it is not a member) gets no access at all: the group bits are cleared rather than
    granted to the creator's group, who were never meant to read it."""
    mode = access.mode
    if access.group is not None and os.stat(path).st_gid != access.group:
        try:
            os.chown(path, -1, access.group)
        except OSError:
            mode &= ~0o070
    os.chmod(path, mode)


def remove(path: Path) -> None:
    """Remove a file, or a directory and everything in it, as far as this process may."""
    if path.is_dir() and not path.is_symlink():
        with contextlib.suppress(OSError):
            os.chmod(path, 0o700)  # a replaced read-only directory (0o500) can still be emptied
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


# The final step is a rename, made exclusive by the kernel where it can be: Linux's renameat2
# with RENAME_NOREPLACE fails when the target exists, whatever it is (an empty directory too,
# onto which a plain rename succeeds), and RENAME_EXCHANGE swaps a replaced output with the new
# one, so that the target is never missing. A lock file would only exclude runs that take it,
# and could be left behind by a killed run; the kernel excludes everyone. Where renameat2 is
# missing (not Linux) or the file system refuses its flags (NFS, some FUSE), the fallbacks
# below keep the exclusion among runs but not the atomicity: see publish.
_AT_FDCWD = -100
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_UNSUPPORTED = {errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP}


@functools.cache
def _renameat2() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # a libc older than glibc 2.28, or another libc
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
    function.argtypes += [ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


def _rename_flagged(source: Path, target: Path, flag: int) -> bool:
    """renameat2(source, target, flag): True once done, False where it cannot be done here."""
    function = _renameat2()
    if function is None:
        return False
    if function(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target), flag) == 0:
        return True
    number = ctypes.get_errno()
    if number in _UNSUPPORTED:
        return False
    raise OSError(number, os.strerror(number), str(source), None, str(target))


def rename_exclusive(source: Path, target: Path) -> None:
    """Rename ``source`` to ``target``, which must not exist: FileExistsError if it does.

    Without renameat2, ``target`` is first claimed by creating it empty (``mkdir`` or an
    exclusive ``open``: atomic, and failing on anything already there), then ``source`` is
    renamed onto that empty claim; for that instant ``target`` is an empty file or directory.
    """
    if _rename_flagged(source, target, _RENAME_NOREPLACE):
        return
    if source.is_dir() and not source.is_symlink():
        os.mkdir(target, 0o700)
    else:
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    claim = identity(target)
    try:
        os.replace(source, target)  # onto the empty claim; onto a full directory it fails
    except OSError as error:
        if claim is not None and claim.same_entry(identity(target)):
            remove(target)
        if error.errno in (errno.ENOTEMPTY, errno.EEXIST):  # the claim was replaced meanwhile
            raise FileExistsError(error.errno, error.strerror, str(target)) from error
        raise


def _replaced_meanwhile(name: str, target: Path) -> FileExistsError:
    return FileExistsError(
        f"{name} {str(target)!r} was replaced or changed while this run was counting (by "
        "another run?); it is left as it is and this run's output is discarded"
    )


def publish(staged: Path, target: Path, replaces: Identity | None, *, name: str) -> None:
    """Give the complete output ``staged`` (a file or a directory beside ``target``) the name
    ``target``: create it when ``replaces`` is None, else replace the entry ``replaces`` names.

    A ``target`` created meanwhile (None), or replaced meanwhile (another identity), is left as
    it is: FileExistsError, and ``staged`` stays where it was for the caller to remove. When
    the run was to replace ``target`` and it has gone meanwhile, ``staged`` takes its place.

    Of two concurrent runs replacing the same ``target``, the first to finish replaces it and
    the second fails: it finds the first one's output, not the one it was asked to replace.
    On Linux the replaced output is swapped out in one step (never missing) and removed after.
    Without that swap, a file is still replaced in one step (``os.replace``; the check that it
    is the one found comes just before), and a directory is renamed aside, then the new one
    renamed in: for that instant ``target`` is missing.
    """
    found = identity(target)
    if replaces is None or found is None:
        try:
            rename_exclusive(staged, target)
        except FileExistsError:
            msg = (
                f"{name} {str(target)!r} was created while this run was counting (by another "
                "run?); it is left as it is and this run's output is discarded"
            )
            raise FileExistsError(msg) from None
        return
    if found != replaces:
        raise _replaced_meanwhile(name, target)
    try:
        exchanged = _rename_flagged(staged, target, _RENAME_EXCHANGE)
    except FileNotFoundError:  # removed since the check above: nothing to replace any more
        return publish(staged, target, None, name=name)
    if exchanged:
        if not replaces.same_entry(identity(staged)):  # another run came in between: undo
            _rename_flagged(staged, target, _RENAME_EXCHANGE)
            raise _replaced_meanwhile(name, target)
        remove(staged)  # the replaced output, swapped out to the staged name
        return
    if not staged.is_dir() or staged.is_symlink():
        os.replace(staged, target)
        return
    retired = target.parent / f".{target.name}.old-{os.urandom(6).hex()}"
    try:
        os.rename(target, retired)
    except FileNotFoundError:  # another run moved it away first
        raise _replaced_meanwhile(name, target) from None
    if not replaces.same_entry(identity(retired)):  # not the one found: not ours to remove
        with contextlib.suppress(OSError):
            rename_exclusive(retired, target)
        raise _replaced_meanwhile(name, target)
    try:
        rename_exclusive(staged, target)
    except FileExistsError:
        raise _replaced_meanwhile(name, target) from None
    finally:
        remove(retired)  # what this run was asked to replace; replaced, by it or another run


def replace_atomically(path: Path, write: Callable[[Path], object], *, name: str) -> None:
    """``write`` a temporary file (in a private folder beside ``path``), then rename it to ``path``.

    A failure or a stop leaves no partial file (and any previous one untouched). The
    temporary file is readable by its owner only while written (``write`` must write
    into it, not replace it); the result then gets the mode and group of the file it
    replaces, or, when new, the mode an ordinary open gives (umask applied).

    Only the file found at ``path`` now is replaced: a file created or replaced there
    meanwhile (by another run) is left as it is, and FileExistsError raised
    (`publish`). ``path`` must be absent or a regular file.
    """
    check_folder(path, name)
    found = existing(path, kind="file", name=name)
    # The file is written inside a private folder of its own: a writer a stop leaves at work
    # (a Polars thread) may open the file again by its path after it is removed, and only a
    # folder renamed away first makes that path lead nowhere (`_discard`).
    staging = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    temporary = staging / path.name
    ours = True
    try:
        try:
            os.mkdir(staging, 0o700)  # inside the ``try``: a stop the instant after removes it
        except FileExistsError:  # not ours (one chance in 2^48): left to whoever made it
            ours = False
            raise
        access = _create_private(
            temporary, folder=path.parent, replaces=path if path.is_file() else None
        )
        write(temporary)
        grant(temporary, access)
        publish(temporary, path, found, name=name)
    finally:
        if ours:
            _remove_despite_a_stop(lambda: _discard(staging))


def _discard(staging: Path) -> None:
    """Remove the private folder ``staging`` and all in it, for good: it is first renamed, so
    that a writer still at work cannot put a file back into it by its path."""
    discarded = staging.with_name(f"{staging.name}.discarded")
    with contextlib.suppress(FileNotFoundError):  # renamed already, by a first try
        os.rename(staging, discarded)
    shutil.rmtree(discarded, ignore_errors=True)


def _create_private(temporary: Path, *, folder: Path, replaces: Path | None) -> Access:
    """Create the empty file ``temporary``, mode 0o600; return the access of the final file.

    That is the mode and group of the file it ``replaces``; for a new file, the mode an
    ordinary open gives in ``folder`` (umask applied), read off an empty probe file, so
    that ``temporary`` is never readable by others, not even for an instant.
    """
    previous = replaces.stat() if replaces is not None else None
    os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    os.chmod(temporary, 0o600)  # a umask such as 0o200 would leave the owner unable to write
    if previous is None:
        return ordinary_file_access(folder)
    return Access(stat.S_IMODE(previous.st_mode), previous.st_gid)


@contextlib.contextmanager
def staged_directory(output: Path, replaces: Identity | None = None) -> Iterator[Path]:
    """A private temporary directory beside ``output``, renamed to ``output`` on success.

    It is created readable by its owner only (0o700: no partial record is readable by
    others), and stays so until every part is complete. Then any file not a part (a
    writer's leftover) is removed, and the directory and its parts get their permissions:

    - replacing the directory ``replaces``, its mode and group, and each part those of the
      replaced part of the same name (a part with none, the narrowest of the replaced files:
      `narrowest`);
    - new, the mode an ordinary ``mkdir`` and ``open`` give here (umask, default ACLs).

    It then takes the name ``output`` (`publish`): it
    creates ``output``, or replaces ``replaces``, and fails with FileExistsError when someone
    created or replaced ``output`` meanwhile. On any error, or a stop, it is removed and
    ``output`` is left as it was.
    """
    staging = output.parent / f".{output.name}.tmp-{uuid.uuid4().hex}"
    ours, own = True, None
    try:
        # Created inside the ``try``: a stop arriving the instant after removes it too.
        try:
            os.mkdir(staging, 0o700)
        except FileExistsError:  # not ours: left to whoever made it
            ours = False
            raise
        own = identity(staging)
        # Whatever the umask, the owner may write the parts; a set-group-ID bit inherited from
        # the folder stays, so the parts get the group an ordinary mkdir would give them.
        os.chmod(staging, 0o700 | stat.S_IMODE(os.stat(staging).st_mode) & stat.S_ISGID)
        folder, other = ordinary_directory_access(staging), ordinary_file_access(staging)
        yield staging
        for entry in staging.iterdir():
            if not (entry.name.startswith(PART_PREFIX) and entry.suffix == ".parquet"):
                entry.unlink()
        parts: dict[str, Access] = {}
        if replaces is not None and identity(output) == replaces:
            folder = access_of(output)
            parts = {
                entry.name: access_of(entry)
                for entry in output.iterdir()
                if entry.is_file() and not entry.is_symlink()
            }
            other = narrowest(list(parts.values()), other)
        for entry in staging.iterdir():
            grant(entry, parts.get(entry.name, other))
        grant(staging, folder)  # the parts first: the directory opens only once they are set
        publish(staging, output, replaces, name="output")
    except BaseException:
        # Ours, and still the one made here (not yet published, nor replaced by another's).
        if ours and (own is None or own.same_entry(identity(staging))):
            _remove_despite_a_stop(lambda: _discard(staging))
        raise


def with_counts(frame: pl.DataFrame, counts: CountArray) -> pl.DataFrame:
    """``frame`` with ``local_cloaking`` (the index type, as the API gives it) and ``hidden``."""
    cloaking = pl.Series("local_cloaking", counts, dtype=pl.get_index_type())
    return frame.with_columns(cloaking, hidden=cloaking > 0)


def part_name(index: int) -> str:
    """The output file of originals partition ``index``."""
    return f"{PART_PREFIX}{index:05d}.parquet"


def write_part(
    frame: pl.DataFrame, directory: Path, index: int, metadata: Mapping[str, str] | None = None
) -> Path:
    """Write ``frame`` as part ``index`` of ``directory``, with the key-value ``metadata``
    (the provenance) in its footer: into a temporary file, then renamed, so a writer killed
    mid-file leaves no part behind, and a re-run replaces it whole."""
    path = directory / part_name(index)
    temporary = directory / f".{path.name}.{uuid.uuid4().hex}.tmp"
    try:
        frame.write_parquet(temporary, metadata=None if metadata is None else dict(metadata))
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return path


def write_counted_part(
    source: Path,
    rows: int,
    counts: CountArray,
    directory: Path,
    index: int,
    *,
    columns: Sequence[str],
    metadata: Mapping[str, str] | None = None,
) -> Path:
    """Read the originals file ``source`` whole, give it its ``counts`` (`with_counts`)
    and write it as part ``index`` of ``directory`` with ``metadata`` (`write_part`); a
    ComputeError when it no longer holds the ``rows`` it held when counted.

    The ``columns`` (the dataset's, in its first file's order) are taken by name, so that
    every part has them in one order whatever order a file has them in."""
    frame = pl.read_parquet(source, glob=False)
    if frame.height != rows or len(counts) != rows:
        msg = f"originals file {str(source)!r} changed while it was being counted"
        raise ComputeError(msg)
    return write_part(with_counts(frame.select(columns), counts), directory, index, metadata)
