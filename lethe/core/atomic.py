"""Crash-safe writes: write to a temporary sibling, then rename into place.

A reader never sees a half-written file or folder: either the old state or the new one.

Files (:func:`atomic_write_bytes`, :func:`atomic_write_text`): a temporary sibling
``.<name>.<random>.tmp`` is written, fsynced and renamed over ``path`` with :func:`os.replace`,
which is atomic for files.

Folders (:func:`atomic_dir`) cannot be renamed over a non-empty folder, so replacing one takes
more care. The design, chosen so that the on-disk layout stays a plain folder at its final path
(no symlink, no lock file beside it; every reader, ``git``, ``shutil.rmtree`` and the callers that
rewrite the temporary path into the final one keep working):

1. The writer creates ``.<name>.<random>.tmp`` beside ``final`` and holds an exclusive
   :func:`fcntl.flock` on that folder for as long as it lives. The kernel drops the lock when the
   process dies, however it dies, so the lock tells a live writer's folder from a crashed one's.
2. It then removes the **debris** of earlier writers of the same ``final``: siblings
   ``.<name>.<8 chars>.tmp`` / ``.old`` that are older than this writer (modified before it started)
   and whose lock it can take (their writer is gone). A live writer's folder is never touched, even
   one that has been filling its folder for hours (a model training, a study).
3. The caller fills the folder.
4. Publishing: if ``final`` does not exist, ``rename(tmp, final)``. If it exists, the two are swapped
   in one system call, ``renameat2(RENAME_EXCHANGE)`` (Linux >= 3.15, glibc >= 2.28; ext4, xfs,
   btrfs, tmpfs, overlayfs): at every instant ``final`` names a complete folder, the old version
   or the new one, never nothing. The old version, now under the temporary name, is removed.
   Concurrent writers of one ``final`` need no lock: each swap is atomic, the last one wins, none
   fails, and each removes the old version it swapped out, so no ``.tmp``/``.old`` folder is left.
5. Where the exchange is not available (another OS, a filesystem such as NFS that answers EINVAL),
   the old folder is moved aside to ``.<name>.<random>.old`` and the new one renamed in, retrying
   when a concurrent writer got in between: writers still never fail and never leak folders, but a
   reader can find ``final`` missing for the instant between the two renames. Where folders cannot
   be flocked (NFS), liveness cannot be told, so debris is left for a person to remove.

Permissions: the temporary file or folder is created private by :mod:`tempfile` (0600/0700); it is
given the mode an ordinary ``open``/``mkdir`` would give under the process's umask (0644/0755 with
the usual umask 022) before it is renamed into place, so colleagues sharing results, processed
datasets and caches can read them.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)


def current_umask() -> int:
    """The process's umask, read without changing it where Linux shows it (``/proc/self/status``);
    elsewhere it is set and restored (not thread-safe, so only as a fallback)."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status", encoding="ascii", errors="replace") as fh:
        for line in fh:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_DISK_FULL = {errno.ENOSPC, errno.EDQUOT}


def located(exc: BaseException, path: Path) -> BaseException:
    """``exc`` when it is not a full disk (or quota), or already names ``path``; else an OSError that says which
    file or folder was being written (``No space left on device`` alone names none)."""
    if not isinstance(exc, OSError):
        return exc
    full = exc.errno in _DISK_FULL or "No space left on device" in str(exc) or "Disk quota exceeded" in str(exc)
    if not full or str(path) in str(exc):
        return exc
    return OSError(
        exc.errno or errno.ENOSPC,
        f"{exc.strerror or exc}: the disk holding {path} is full (while "
        f"writing {path}); free space there or point the setting that names it at another disk",
    )


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (same-directory temp file + ``os.replace``); the file
    gets the umask's mode (0644 under umask 022), not mkstemp's private 0600."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), 0o666 & ~current_umask())
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        where = located(exc, path)
        if where is exc:
            raise
        raise where from exc


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


# ---------------------------------------------------------------------------------------------
# Folders

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP}
_CONTENDED = {errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES}
_renameat2 = None


def _libc_renameat2():
    global _renameat2
    if _renameat2 is None:
        fn = False
        with contextlib.suppress(OSError, AttributeError, TypeError):
            libc = ctypes.CDLL(None, use_errno=True)
            fn = libc.renameat2
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
            fn.restype = ctypes.c_int
        _renameat2 = fn
    return _renameat2 or None


def exchange(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Swap the paths ``a`` and ``b`` in one atomic step (``renameat2(RENAME_EXCHANGE)``). False
    when this system or filesystem cannot; raises ``FileNotFoundError`` when either is missing."""
    fn = _libc_renameat2()
    if fn is None:
        return False
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in _UNSUPPORTED:
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def _lock_folder(path: Path, blocking: bool) -> int | None:
    """An fd holding an exclusive flock on folder ``path``; None when another process holds it
    (only when not ``blocking``). Raises OSError when the filesystem cannot lock folders."""
    if fcntl is None:
        raise OSError(errno.ENOSYS, "fcntl is unavailable")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except OSError as err:
        os.close(fd)
        if not blocking and err.errno in _CONTENDED:
            return None
        raise
    return fd


def _new_temp_dir(final: Path) -> tuple[Path, int | None]:
    """A fresh ``.<name>.<random>.tmp`` beside ``final`` with the umask's mode, flocked by this
    process (fd None where folders cannot be locked)."""
    mode = 0o777 & ~current_umask()
    while True:
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
        try:
            os.chmod(tmp, mode)
        except FileNotFoundError:  # a cleaner took it for debris before it was locked: start again
            continue
        try:
            fd = _lock_folder(tmp, blocking=True)
        except FileNotFoundError:
            continue
        except OSError as err:
            log.debug("cannot lock %s (%s); stale folders of %s will not be removed", tmp, err, final)
            return tmp, None
        st = os.fstat(fd)
        try:
            same = os.stat(tmp).st_ino == st.st_ino and st.st_nlink > 0
        except FileNotFoundError:
            same = False
        if same:
            return tmp, fd
        os.close(fd)  # removed by a cleaner between mkdtemp and the lock: start again


def debris(final: str | os.PathLike) -> list[Path]:
    """The temporary (``.tmp``) and moved-aside (``.old``) sibling folders of ``final``'s writers,
    live or not."""
    final = Path(final)
    pattern = re.compile(rf"\.{re.escape(final.name)}\.[a-z0-9_]{{8}}\.(tmp|old)")
    with contextlib.suppress(FileNotFoundError):
        return sorted(
            p for p in final.parent.iterdir() if pattern.fullmatch(p.name) and p.is_dir() and not p.is_symlink()
        )
    return []


def remove_stale(final: str | os.PathLike, before: float) -> list[Path]:
    """Remove the debris of ``final`` that crashed writers left: folders modified before ``before``
    (a ``time.time()``) whose writer no longer holds its lock. Returns what was removed."""
    removed = []
    for p in debris(final):
        try:
            if p.stat().st_mtime >= before:
                continue
            fd = _lock_folder(p, blocking=False)
        except FileNotFoundError:
            continue
        except OSError:
            continue  # cannot tell whether its writer lives: leave it
        if fd is None:
            continue  # a live writer
        try:
            shutil.rmtree(p, ignore_errors=True)
        finally:
            os.close(fd)
        log.info("removed %s, left by a writer of %s that is gone", p, Path(final).name)
        removed.append(p)
    return removed


def _publish(tmp: Path, final: Path) -> Path | None:
    """Put ``tmp`` at ``final``; returns where the replaced version now is (to remove), if any."""
    while True:
        try:
            os.rename(tmp, final)  # final absent (or an empty folder)
            return None
        except OSError as err:
            if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
        try:
            if exchange(tmp, final):
                return tmp  # the old version now lives under the temporary name
        except FileNotFoundError:
            continue  # final vanished (a fallback writer between its renames): try again
        # fallback: move the old version aside, then rename the new one in
        old = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".old", dir=final.parent))
        try:
            os.rename(final, old)
        except FileNotFoundError:
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(old)  # (a cleaner may have taken the empty folder for debris)
            continue
        try:
            os.rename(tmp, final)
            return old
        except OSError as err:
            shutil.rmtree(old, ignore_errors=True)  # a concurrent writer's version came in between
            if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise


@contextlib.contextmanager
def _locked_temp(final: Path) -> Iterator[Path]:
    """A fresh temporary folder beside ``final``, locked for the block; debris of crashed earlier writers removed."""
    started = time.time()
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp, fd = _new_temp_dir(final)
    try:
        remove_stale(final, before=started)
        yield tmp
    finally:
        if fd is not None:
            os.close(fd)


@contextlib.contextmanager
def atomic_dir(final: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary folder that becomes ``final`` only if the block succeeds.

    An existing ``final`` is replaced in one atomic swap where the system allows it (see the module
    docstring); concurrent writers of one ``final`` never fail and the last one wins. On any
    exception the temporary folder is removed and ``final`` is left untouched. Debris of crashed
    earlier writers of ``final`` is removed on entry.
    """
    final = Path(final)
    with _locked_temp(final) as tmp:
        try:
            yield tmp
            old = _publish(tmp, final)
        except BaseException as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            where = located(exc, final)
            if where is exc:
                raise
            raise where from exc
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def scratch_dir(final: str | os.PathLike) -> Iterator[Path]:
    """A temporary folder beside ``final`` (``.<name>.<random>.tmp``, locked while this process lives), removed after
    the block however it ends: for work that is published piece by piece with :func:`replace_entry`. Debris of
    crashed earlier holders is removed on entry, as :func:`atomic_dir` does."""
    with _locked_temp(Path(final)) as tmp:
        try:
            yield tmp
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def replace_entry(src: str | os.PathLike, dest: str | os.PathLike) -> None:
    """Move the file or folder ``src`` to ``dest`` in one atomic step (a folder by exchange where the system allows,
    see the module docstring), replacing what was there; the replaced version is removed."""
    src, dest = Path(src), Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if not src.is_dir() or src.is_symlink():
        if dest.is_dir() and not dest.is_symlink():
            shutil.rmtree(dest)  # a folder where a file now goes (never the case for one writer's layout)
        os.replace(src, dest)
        return
    if dest.exists() and not dest.is_dir():
        dest.unlink()
    old = _publish(src, dest)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
