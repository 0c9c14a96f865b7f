"""One writer per results folder: an exclusive lock file that a crashed process does not leave stuck.

``with FolderLock(path, owner="banditkit bo --out x"):`` holds ``path`` (e.g. ``x/bo.lock``) for the block; a second
process (or a second ``FolderLock`` in this one) trying to take it gets :class:`FolderBusy`, whose message names the
folder and the holder: its pid, host, start time and command, read from the JSON record in the lock file::

    {"pid": 4242, "host": "node7", "started": "2026-12-01 17:40:02 UTC", "owner": "banditkit bo --out x"}

How the lock is held (POSIX, where the file system supports it): an ``fcntl.flock(LOCK_EX | LOCK_NB)`` on the open
lock file.  The kernel releases it when the process ends in any way (SIGKILL included), so:

- ``flock`` refused: a live process holds it -> busy;
- ``flock`` granted on a file that still holds a record: its writer ended without releasing (killed) -> stale; when
  the record names this host the lock is taken over (:attr:`FolderLock.taken_over` keeps the old record); when it
  names another host, ``flock`` may not reach across hosts on this file system, so whether that process still runs
  cannot be told from here -> busy, unless ``force=True`` (the CLI's ``--force-unlock``) or the file is removed;
- released: the file is unlinked while still locked, then closed; a process that locked the unlinked file in the
  meantime sees that the path no longer names its file and tries again.

Fallback (no ``fcntl``, or a file system that refuses ``flock``): the lock file created with ``O_EXCL`` is the lock;
an existing record is stale when it names this host and its pid is not alive (``os.kill(pid, 0)``), and is moved
aside and replaced; a record from another host, an unreadable one, or any record on a platform without that check
(Windows) is busy unless ``force=True``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import time
from typing import Any

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["FolderLock", "FolderBusy"]

# errors by which a file system says it has no flock (NFS without lockd, some FUSE / SMB mounts)
_NO_FLOCK = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL, errno.ENOSYS}
_ATTEMPTS = 20  # tries when the lock file is replaced or removed under us (a holder releasing it meanwhile)
_READ_TRIES, _READ_PAUSE = 10, 0.05  # a record being written: read again for up to half a second


class FolderBusy(RuntimeError):
    """Another process holds (or may hold) the lock of a results folder.

    ``owner``: its record (``pid``, ``host``, ``started``, ``owner``) or ``None`` when unreadable; ``checked``: True
    when that process is known to run (the OS lock is held, or its pid is alive on this host), False when it could not
    be checked (another host, an unreadable record)."""

    def __init__(self, lock_file: str, owner: dict | None, checked: bool, force_hint: str):
        self.lock_file, self.owner, self.checked = lock_file, owner, checked
        folder = os.path.dirname(lock_file) or "."
        who = _describe(owner)
        if checked:
            msg = (f"{folder!r} is being written by another process ({who}); wait for it to end or stop it, or write "
                   f"into another folder")
        else:
            why = (f"it runs on another host than this one ({socket.gethostname()}), so whether it still runs cannot "
                   "be checked from here" if owner is not None and owner.get("host") != socket.gethostname()
                   else "this machine cannot check whether it still runs")
            msg = (f"{folder!r} is locked by another process ({who}) and {why}; if it has stopped, take the folder "
                   f"over with {force_hint} (or delete {lock_file}), else wait for it or write into another folder")
        super().__init__(msg)


def _describe(owner: dict | None) -> str:
    if owner is None:
        return "its lock record is empty or unreadable"
    text = f"pid {owner.get('pid')} on host {owner.get('host')}, started {owner.get('started')}"
    return text + (f": {owner['owner']}" if owner.get("owner") else "")


def _read_record(path: str, retry: bool = True) -> dict | None:
    """The JSON record in ``path``; ``None`` when it is empty or not a record (after a short wait when ``retry``:
    its writer may be writing it).  ``FileNotFoundError`` when the file is gone."""
    for i in range(_READ_TRIES if retry else 1):
        with open(path, "rb") as fh:
            raw = fh.read()
        try:
            rec = json.loads(raw.decode("utf-8"))
            if isinstance(rec, dict) and "pid" in rec and "host" in rec:
                return rec
        except (UnicodeDecodeError, ValueError):
            pass
        if i + 1 < (_READ_TRIES if retry else 1):
            time.sleep(_READ_PAUSE)
    return None


def _pid_alive(pid: Any) -> bool | None:
    """Whether process ``pid`` of this host runs; ``None`` where this cannot be checked (not POSIX, a bad pid)."""
    if os.name != "posix" or not isinstance(pid, int) or pid <= 0:
        return None  # on Windows os.kill(pid, 0) would terminate the process: never call it there
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by another user
        return True
    return True


class FolderLock:
    """The exclusive lock file ``path`` (its folder must exist); a context manager, or :meth:`acquire` /
    :meth:`release`.  ``owner``: a description of the holder for other processes' messages (e.g. its command line);
    ``force``: take over a record that cannot be checked; ``force_hint``: how the user asks for that, in the
    message."""

    def __init__(self, path: str | os.PathLike, *, owner: str = "", force: bool = False,
                 force_hint: str = "force=True"):
        self.path = os.fspath(path)
        self.owner, self.force, self.force_hint = owner, force, force_hint
        self.taken_over: dict | None = None  # the record of a stopped process whose lock this one took over
        self._fd: int | None = None
        self._record: dict | None = None

    @property
    def held(self) -> bool:
        return self._record is not None

    def _new_record(self) -> dict:
        return dict(pid=os.getpid(), host=socket.gethostname(),
                    started=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), owner=self.owner)

    def _busy(self, owner: dict | None, checked: bool) -> FolderBusy:
        return FolderBusy(self.path, owner, checked, self.force_hint)

    def acquire(self) -> FolderLock:
        if self.held:
            raise RuntimeError(f"the lock {self.path!r} is held by this FolderLock already")
        for _ in range(_ATTEMPTS):
            done = self._try_flock() if fcntl is not None else None
            if done is None:  # no flock here
                done = self._try_exclusive()
            if done:
                return self
        raise self._busy(None, False)  # the file kept changing under us: something else is busy with it

    # -- flock ---------------------------------------------------------------------------------------------------
    def _try_flock(self) -> bool | None:
        """True: held; False: the file changed under us (try again); None: no flock on this file system."""
        try:
            fd, created = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644), True
        except FileExistsError:
            try:
                fd, created = os.open(self.path, os.O_RDWR), False
            except FileNotFoundError:
                return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            try:
                owner = _read_record(self.path)
            except FileNotFoundError:  # released meanwhile
                return False
            raise self._busy(owner, True) from None
        except OSError as e:
            os.close(fd)
            if e.errno not in _NO_FLOCK:
                raise
            if created:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path)
            return None
        ok = False
        try:
            if not self._same_file(fd):  # the holder we waited for removed it: ours is a dead file
                return False
            old = None if created else _read_record(self.path, retry=False)
            if old is not None and old.get("host") != socket.gethostname() and not self.force:
                raise self._busy(old, False)  # its process may still run there (flock need not reach across hosts)
            self._write(fd)
            ok = True
        finally:
            if not ok:
                os.close(fd)
        self.taken_over = old
        return True

    def _same_file(self, fd: int) -> bool:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False
        mine = os.fstat(fd)
        return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)

    def _write(self, fd: int) -> None:
        rec = self._new_record()
        data = json.dumps(rec).encode("utf-8")
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, data)
        os.fsync(fd)
        self._fd, self._record = fd, rec

    # -- fallback: O_EXCL record file ----------------------------------------------------------------------------------
    def _try_exclusive(self) -> bool:
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            try:
                old = _read_record(self.path)
            except FileNotFoundError:
                return False
            alive = None if old is None or old.get("host") != socket.gethostname() else _pid_alive(old.get("pid"))
            if alive or (alive is None and not self.force):
                raise self._busy(old, bool(alive)) from None
            self._move_aside(old)
            return False
        try:
            self._write(fd)
        finally:
            os.close(fd)
        self._fd = None  # the file, not a descriptor, is the lock
        return True

    def _move_aside(self, judged: dict | None) -> None:
        """Remove the stale lock file whose record is ``judged``; if another process replaced it meanwhile (its
        record differs), put that one back and report it busy."""
        aside = f"{self.path}.{os.getpid()}.stale"
        try:
            os.replace(self.path, aside)
        except FileNotFoundError:
            return
        try:
            moved = _read_record(aside, retry=False)
            if moved != judged:
                with contextlib.suppress(OSError):
                    os.link(aside, self.path)
                raise self._busy(moved, True)
            self.taken_over = judged
        finally:
            os.unlink(aside)

    # -- release -----------------------------------------------------------------------------------------------------
    def release(self) -> None:
        """Give the lock up (the lock file is removed); a no-op when not held."""
        if not self.held:
            return
        try:
            if self._fd is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path)  # while still locked: see the module docstring
            else:
                with contextlib.suppress(FileNotFoundError):
                    if _read_record(self.path, retry=False) == self._record:
                        os.unlink(self.path)
        finally:
            if self._fd is not None:
                os.close(self._fd)
            self._fd, self._record = None, None

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

