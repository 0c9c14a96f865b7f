"""Safe handling of third-party files: a NumPy-only unpickler and path-checked archive extraction.

* :func:`load_numpy_pickle` opens a (gzip-compressed) pickle with :class:`NumpyOnlyUnpickler`, which resolves
  only the globals that NumPy array reconstruction needs (``ndarray``, ``dtype``, ``_reconstruct``, ``scalar``,
  and ``_codecs.encode`` restricted to latin-1, which protocol-2 pickles use for raw bytes);
  any other global (``os.system``, ``builtins.eval``, ...) raises :class:`UnsafeFileError`.  Containers
  (tuples, lists, dicts) and numbers are plain pickle opcodes and need no globals.
* :func:`zip_members` copies named members out of a zip file by reading their bytes and writing them under a
  destination folder with their *base name*, so a member name like ``../../etc/x`` cannot escape.
* :func:`deb_members` does the same for a Debian package, reading its data tarball from ``dpkg-deb --fsys-tarfile``
  and refusing links, absolute paths and ``..`` components.
* Truncated or corrupt gzip/zip data raise :class:`CorruptFileError` with a re-fetch hint.
"""

from __future__ import annotations

import gzip
import io
import os
import pickle
import posixpath
import subprocess
import tarfile
import zipfile
import zlib
from pathlib import Path

import numpy as np

__all__ = ["UnsafeFileError", "CorruptFileError", "NumpyOnlyUnpickler", "load_numpy_pickle", "zip_members",
           "deb_members", "safe_member_name"]


class UnsafeFileError(ValueError):
    """A file asked for something a data file must not (a non-NumPy pickle global, a path outside the target)."""


class CorruptFileError(ValueError):
    """A file is truncated, corrupt or has the wrong checksum."""


def _latin1_encode(text: str, encoding: str = "latin1") -> bytes:
    """``_codecs.encode`` as protocol-2 pickles use it for raw bytes (latin-1 only)."""
    if encoding.lower().replace("-", "") != "latin1" or not isinstance(text, str):
        raise UnsafeFileError(f"refusing _codecs.encode with encoding {encoding!r} in a data pickle")
    return text.encode("latin1")


_ALLOWED_GLOBALS = {
    ("_codecs", "encode"): _latin1_encode,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("numpy.core.multiarray", "_reconstruct"): np.ndarray.__reduce__(np.zeros(1))[0],
    ("numpy._core.multiarray", "_reconstruct"): np.ndarray.__reduce__(np.zeros(1))[0],
    ("numpy.core.multiarray", "scalar"): np.float64(0).__reduce__()[0],
    ("numpy._core.multiarray", "scalar"): np.float64(0).__reduce__()[0],
}


class NumpyOnlyUnpickler(pickle.Unpickler):
    """A ``pickle.Unpickler`` whose ``find_class`` allows NumPy array reconstruction and nothing else."""

    def find_class(self, module: str, name: str):  # noqa: D401 - pickle API
        try:
            return _ALLOWED_GLOBALS[(module, name)]
        except KeyError:
            raise UnsafeFileError(
                f"refusing to unpickle global {module}.{name}: only NumPy arrays are allowed in a data pickle"
            ) from None


def load_numpy_pickle(path: str | os.PathLike, *, encoding: str = "latin1", refetch: str = "") -> object:
    """Unpickle ``path`` (gzip-compressed if it ends in ``.gz``) with :class:`NumpyOnlyUnpickler`.

    Raises:
      UnsafeFileError: the pickle references anything but NumPy array reconstruction.
      CorruptFileError: the file is truncated or not a valid (gzip) pickle; ``refetch`` is appended as a hint.
    """
    opener = gzip.open if str(path).endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
        return NumpyOnlyUnpickler(io.BytesIO(raw), encoding=encoding).load()
    except UnsafeFileError:
        raise
    except (EOFError, OSError, zlib.error, pickle.UnpicklingError, ValueError, IndexError) as e:
        raise CorruptFileError(f"{path} is truncated or corrupt ({e}); delete it and fetch again. {refetch}") from e


def safe_member_name(name: str) -> str:
    """``name`` if it is a relative archive path without ``..``; else :class:`UnsafeFileError`."""
    norm = posixpath.normpath(name.replace("\\", "/"))
    if norm.startswith("/") or norm == ".." or norm.startswith("../") or "/../" in f"/{norm}/" or ":" in norm:
        raise UnsafeFileError(f"refusing archive member {name!r}: it points outside the extraction folder")
    return norm


def zip_members(archive: str | os.PathLike, members: list[str], dest: str | os.PathLike) -> dict[str, Path]:
    """Copy ``members`` (exact names) out of a zip file into ``dest`` under their base names.

    Returns ``{member: extracted path}``.  Raises ``FileNotFoundError`` for a missing member and
    :class:`CorruptFileError` for a damaged archive.
    """
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    try:
        with zipfile.ZipFile(archive) as zf:
            names = set(zf.namelist())
            for m in members:
                safe_member_name(m)
                if m not in names:
                    raise FileNotFoundError(f"{archive} has no member {m!r}")
                target = dest / posixpath.basename(m)
                with zf.open(m) as src, open(target, "wb") as dst:
                    while block := src.read(1 << 20):
                        dst.write(block)
                out[m] = target
    except (zipfile.BadZipFile, zlib.error, EOFError) as e:
        raise CorruptFileError(f"{archive} is not a valid zip archive ({e}); delete it and fetch again") from e
    return out


def _strip_dot_slash(name: str) -> str:
    """``./usr/x`` -> ``usr/x`` (only whole leading ``./`` components; ``lstrip`` would also eat ``..`` or ``.x``)."""
    while name.startswith("./"):
        name = name[2:]
    return name


def deb_members(deb: str | os.PathLike, members: list[str], dest: str | os.PathLike) -> dict[str, Path]:
    """Copy regular-file ``members`` (paths inside the package, e.g. ``usr/share/x.gz``) out of a ``.deb``.

    Uses ``dpkg-deb --fsys-tarfile`` and Python's ``tarfile``; links, devices and unsafe names are refused.
    """
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    wanted = {safe_member_name(_strip_dot_slash(m)): m for m in members}
    try:
        proc = subprocess.run(["dpkg-deb", "--fsys-tarfile", os.fspath(deb)], check=True, capture_output=True)
    except FileNotFoundError as e:
        raise RuntimeError("dpkg-deb is not installed; it is needed to unpack Debian packages") from e
    except subprocess.CalledProcessError as e:
        raise CorruptFileError(f"{deb} is not a valid Debian package: {e.stderr.decode(errors='replace')[:200]}") from e
    out: dict[str, Path] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(proc.stdout), mode="r:") as tf:
            for info in tf:
                name = posixpath.normpath(_strip_dot_slash(info.name)) if info.name not in (".", "./") else ""
                if name not in wanted:
                    continue
                safe_member_name(_strip_dot_slash(info.name))
                if not info.isfile():
                    raise UnsafeFileError(f"refusing {info.name!r} in {deb}: not a regular file")
                target = dest / posixpath.basename(name)
                src = tf.extractfile(info)
                assert src is not None
                with src, open(target, "wb") as dst:
                    while block := src.read(1 << 20):
                        dst.write(block)
                out[wanted[name]] = target
    except tarfile.TarError as e:
        raise CorruptFileError(f"{deb} holds a damaged data archive ({e}); delete it and fetch again") from e
    missing = [m for m in members if m not in out]
    if missing:
        raise FileNotFoundError(f"{deb} has no member(s) {missing}")
    return out
