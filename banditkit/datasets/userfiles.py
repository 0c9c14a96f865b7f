"""Hash records of user-supplied data files (``load(name, data_dir=...)``): recorded at first use, warned on change.

The official files of ``kuairec, covertype, census, jester, financial`` come from the user, so their content
cannot be pinned in the code.  Instead the first load records each file's SHA-256 in
``<cache>/user_files.json`` (the cache of :func:`banditkit.datasets.cache_dir`)::

    {"/abs/path/covtype.data.gz": {"dataset": "covertype", "sha256": "...", "size": 11240707,
                                   "recorded_utc": "2026-12-01T18:00:00Z"}, ...}

and a later load whose file hashes differently emits :class:`UserFileChangedWarning`, naming the dataset, the file,
both hashes and the date of the record.  The first recorded hash stays the reference, so every process that reads
the changed file warns (not only the first one); deleting the file's entry from the record accepts the new content.
The record is rewritten atomically (temporary file, then ``os.replace``) and entries whose file no longer exists
are dropped at each write.  Two processes recording at the same moment can lose one entry, which the next load
records again.  Within a process, a file whose :func:`~banditkit.datasets.integrity.file_identity` was already
checked is not hashed again.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import warnings
from collections.abc import Iterable
from pathlib import Path

from banditkit.datasets._paths import cache_dir, sha256_file
from banditkit.datasets.integrity import file_identity

RECORD_NAME = "user_files.json"

_checked: set[tuple[str, int, int, int, int]] = set()


class UserFileChangedWarning(UserWarning):
    """A user-supplied data file differs from the hash recorded when banditkit first read it."""


def record_path() -> Path:
    """``<cache>/user_files.json``."""
    return cache_dir() / RECORD_NAME


def _read_record(path: Path) -> dict[str, dict]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return {}  # unreadable or half-written by an older version: start afresh (it is only a record)
    return data if isinstance(data, dict) else {}


def _write_record(path: Path, record: dict[str, dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    kept = {p: e for p, e in sorted(record.items()) if os.path.exists(p)}
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(kept, f, indent=1)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def check_user_files(name: str, paths: Iterable[str | os.PathLike]) -> None:
    """Record the SHA-256 of each of ``paths`` (files of dataset ``name``) at first use; warn when one changed.

    Warns :class:`UserFileChangedWarning` for a changed file, and :class:`RuntimeWarning` when the record cannot be
    written (changes would then go unnoticed)."""
    todo = []
    for p in paths:
        ident = file_identity(p)
        if ident not in _checked:
            todo.append((ident[0], ident))
    if not todo:
        return
    where = record_path()
    record = _read_record(where)
    dirty = False
    for path, ident in todo:
        got = sha256_file(path)
        entry = record.get(path)
        if entry is None:
            record[path] = {"dataset": name, "sha256": got, "size": ident[2],
                            "recorded_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            dirty = True
        elif entry.get("sha256") != got:
            warnings.warn(
                f"dataset {name!r}: the file {path} changed since banditkit first read it "
                f"({entry.get('recorded_utc', 'date unknown')}): SHA-256 {entry.get('sha256')} then, {got} now, so "
                f"results may differ from earlier runs with it. If the new file is intended, delete its entry from "
                f"{where} (the next load records the new hash).", UserFileChangedWarning, stacklevel=3)
        _checked.add(ident)
    if dirty:
        try:
            _write_record(where, record)
        except OSError as e:
            warnings.warn(f"could not write the hash record {where} ({e}); later changes to the files of dataset "
                          f"{name!r} will not be detected (set BANDITKIT_DATA to a writable folder)", RuntimeWarning,
                          stacklevel=3)
