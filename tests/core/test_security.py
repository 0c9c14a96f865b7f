"""Security of the data path: no blind unpickling, no archive path traversal, checksummed cache, no pickle in
checkpoints.

* A pickle whose ``__reduce__`` calls ``os.system`` (or ``eval``, ``subprocess.Popen``...) is refused by the datasets'
  restricted unpickler (:class:`banditkit.datasets.safe.NumpyOnlyUnpickler` via ``load_numpy_pickle``) and the
  command never runs; a genuine NumPy pickle still loads.
* Archive members named ``../evil`` (zip via ``zip_members``; a hand-built Debian package via ``deb_members``) are
  refused and nothing is written outside the target folder; links are refused.
* A cached dataset file whose content no longer matches the hash pinned in the catalogue raises ``CorruptFileError``
  naming the re-fetch command (with or without its ``SOURCE.json``).
* ``banditkit.checkpoint.load`` refuses an archive member that would need pickle.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import os
import pickle
import shutil
import tarfile
import time
import zipfile

import numpy as np
import pytest

from banditkit import checkpoint
from banditkit.datasets import CATALOG, CorruptFileError, UnsafeFileError, load, load_numpy_pickle, sha256_file
from banditkit.datasets.integrity import content_hash
from banditkit.datasets.safe import NumpyOnlyUnpickler, deb_members, safe_member_name, zip_members


# ------------------------------------------------------------------------------------------------------------------
# malicious pickles
# ------------------------------------------------------------------------------------------------------------------
class _Evil:
    def __init__(self, fn, arg):
        self.fn, self.arg = fn, arg

    def __reduce__(self):
        return self.fn, (self.arg,)


def _payloads(marker: str):
    import subprocess

    cmd = f"touch {marker}"
    return {
        "os.system": _Evil(os.system, cmd),
        "builtins.eval": _Evil(eval, f"__import__('os').system({cmd!r})"),
        "builtins.exec": _Evil(exec, f"open({marker!r}, 'w').close()"),
        "subprocess.Popen": _Evil(subprocess.Popen, ["touch", marker]),
        # a payload nested inside an innocent-looking container next to a real array
        "nested": {"X": np.zeros(3), "y": [1, 2, _Evil(os.system, cmd)]},
    }


@pytest.mark.parametrize("kind", ["os.system", "builtins.eval", "builtins.exec", "subprocess.Popen", "nested"])
@pytest.mark.parametrize("compressed", [False, True])
def test_malicious_pickle_is_refused(tmp_path, kind, compressed):
    marker = str(tmp_path / "PWNED")
    payload = pickle.dumps(_payloads(marker)[kind], protocol=2)
    path = tmp_path / ("data.pkl.gz" if compressed else "data.pkl")
    (gzip.open if compressed else open)(path, "wb").write(payload)
    with pytest.raises(UnsafeFileError, match="refusing to unpickle global") as info:
        load_numpy_pickle(path)
    assert "only NumPy arrays" in str(info.value)
    assert not os.path.exists(marker), "the payload ran"
    # the unpickler itself, on the raw bytes
    with pytest.raises(UnsafeFileError):
        NumpyOnlyUnpickler(io.BytesIO(payload)).load()
    assert not os.path.exists(marker)


def test_every_protocol_refuses_os_system(tmp_path):
    marker = str(tmp_path / "PWNED")
    for protocol in range(0, pickle.HIGHEST_PROTOCOL + 1):
        path = tmp_path / f"p{protocol}.pkl"
        path.write_bytes(pickle.dumps(_Evil(os.system, f"touch {marker}"), protocol=protocol))
        with pytest.raises(UnsafeFileError):
            load_numpy_pickle(path)
    assert not os.path.exists(marker)


def test_codecs_encode_only_latin1(tmp_path):
    """``_codecs.encode`` is allowed (protocol-2 bytes) but only as latin-1, never as an arbitrary codec."""
    import codecs

    path = tmp_path / "c.pkl"
    path.write_bytes(pickle.dumps(_Evil2(codecs.encode, ("x", "rot13")), protocol=2))
    with pytest.raises(UnsafeFileError, match="_codecs.encode"):
        load_numpy_pickle(path)


class _Evil2:
    def __init__(self, fn, args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def test_genuine_numpy_pickle_still_loads(tmp_path):
    """Not vacuous: the MNIST-style pickle (protocol 2, gzip, tuple of arrays) loads exactly."""
    x = np.arange(12, dtype=np.uint8).reshape(3, 4)
    y = np.array([1.5, -2.0], np.float32)
    path = tmp_path / "ok.pkl.gz"
    with gzip.open(path, "wb") as f:
        pickle.dump(((x, y), {"n": 3, "scale": np.float64(0.5)}), f, protocol=2)
    (xa, ya), meta = load_numpy_pickle(path)
    np.testing.assert_array_equal(xa, x)
    np.testing.assert_array_equal(ya, y)
    assert meta == {"n": 3, "scale": 0.5}


def test_truncated_pickle_is_corrupt_not_unsafe(tmp_path):
    path = tmp_path / "t.pkl"
    path.write_bytes(pickle.dumps(np.zeros(100), protocol=2)[:50])
    with pytest.raises(CorruptFileError, match="fetch again"):
        load_numpy_pickle(path)


# ------------------------------------------------------------------------------------------------------------------
# path traversal in archives
# ------------------------------------------------------------------------------------------------------------------
EVIL_NAMES = ["../evil", "a/../../evil", "/tmp/evil_abs", "..\\evil", "C:/evil", "ok/../../../evil"]


@pytest.mark.parametrize("name", EVIL_NAMES)
def test_safe_member_name_refuses_escapes(name):
    with pytest.raises(UnsafeFileError, match="outside the extraction folder"):
        safe_member_name(name)


def test_safe_member_name_keeps_normal_paths():
    assert safe_member_name("data/train.csv") == "data/train.csv"
    assert safe_member_name("./a/./b.txt") == "a/b.txt"


def _listing(root) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs}


def test_zip_member_dotdot_is_not_written_outside(tmp_path):
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("../evil", b"pwned")
        zf.writestr("a/../../evil2", b"pwned")
        zf.writestr("data/ok.txt", b"fine")
    dest = tmp_path / "out" / "target"
    before = _listing(tmp_path)
    for bad in ("../evil", "a/../../evil2"):
        with pytest.raises(UnsafeFileError):
            zip_members(archive, [bad], dest)
    assert _listing(tmp_path) == before, "something was written"
    assert not (tmp_path / "out" / "evil").exists() and not (tmp_path / "evil").exists()
    # a legitimate member is extracted under dest (base name only)
    out = zip_members(archive, ["data/ok.txt"], dest)
    assert out["data/ok.txt"] == dest / "ok.txt" and (dest / "ok.txt").read_bytes() == b"fine"
    assert _listing(tmp_path) - before == {"out/target/ok.txt"}


def _tar_bytes(members) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data, kind in members:
            info = tarfile.TarInfo(name)
            if kind == "sym":
                info.type, info.linkname = tarfile.SYMTYPE, data.decode()
                tf.addfile(info)
            else:
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _deb(path, data_members):
    """A minimal Debian package (ar archive: debian-binary, control.tar.gz, data.tar.gz) built by hand."""
    control = _tar_bytes([("./control", b"Package: evil\nVersion: 1\nArchitecture: all\nMaintainer: x\n", "f")])
    entries = [("debian-binary", b"2.0\n"), ("control.tar.gz", control), ("data.tar.gz", _tar_bytes(data_members))]
    out = b"!<arch>\n"
    for name, data in entries:
        out += f"{name:<16}{int(time.time()):<12}{0:<6}{0:<6}{100644:<8}{len(data):<10}`\n".encode()
        out += data + (b"\n" if len(data) % 2 else b"")
    path.write_bytes(out)


_NEEDS_DPKG = pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="dpkg-deb not installed (Debian tool)")
_EVIL_DEB = [
    ("./usr/share/ok.txt", b"fine", "f"),
    ("../evil", b"pwned", "f"),
    ("./usr/share/link", b"/etc/passwd", "sym"),
]


@_NEEDS_DPKG
def test_deb_never_writes_outside_target_and_refuses_links(tmp_path):
    deb = tmp_path / "evil.deb"
    _deb(deb, _EVIL_DEB)
    dest = tmp_path / "out"
    try:
        deb_members(deb, ["../evil"], dest)
    except UnsafeFileError:
        pass  # refusing is the right answer (see the xfail below); writing inside dest is tolerated here
    with pytest.raises(UnsafeFileError, match="not a regular file"):
        deb_members(deb, ["usr/share/link"], dest)
    out = deb_members(deb, ["usr/share/ok.txt"], dest)
    assert out["usr/share/ok.txt"].read_bytes() == b"fine"
    outside = {p for p in _listing(tmp_path) if not p.startswith("out/")} - {"evil.deb"}
    assert not outside, f"written outside the target: {outside}"
    assert not (tmp_path / "evil").exists() and not (tmp_path.parent / "evil").exists()


@_NEEDS_DPKG
def test_deb_refuses_dotdot_request(tmp_path):
    deb = tmp_path / "evil.deb"
    _deb(deb, _EVIL_DEB)
    with pytest.raises(UnsafeFileError):
        deb_members(deb, ["../evil"], tmp_path / "out")


# ------------------------------------------------------------------------------------------------------------------
# checksummed cache
# ------------------------------------------------------------------------------------------------------------------
def _fake_cached_mnist(root, monkeypatch):
    """A tiny MNIST-shaped cache entry; the catalogue's pinned content hash is patched to its content."""
    folder = root / "mnist"
    folder.mkdir(parents=True)
    arrays = dict(
        X_train=np.zeros((2, 28, 28), np.uint8), y_train=np.array([0, 1], np.uint8),
        X_test=np.ones((1, 28, 28), np.uint8), y_test=np.array([7], np.uint8),
    )  # fmt: skip
    np.savez(folder / "mnist.npz", **arrays)
    record = {"source": "test", "files": {"mnist.npz": sha256_file(folder / "mnist.npz")}}
    (folder / "SOURCE.json").write_text(json.dumps(record))
    monkeypatch.setitem(CATALOG, "mnist", dataclasses.replace(CATALOG["mnist"], content_sha256=content_hash(
        "mnist", arrays)))
    return folder / "mnist.npz", arrays


def _touch_later(path):
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9 * (1 + int(time.time()) % 1000)))


def test_checksum_mismatch_on_cached_file_names_refetch(tmp_path, monkeypatch):
    monkeypatch.setenv("BANDITKIT_DATA", str(tmp_path))
    path, arrays = _fake_cached_mnist(tmp_path, monkeypatch)
    d = load("mnist")  # intact: loads
    np.testing.assert_array_equal(d["y_test"], arrays["y_test"])
    # tamper: same shapes, one label changed (a valid npz, only the checksum can tell)
    np.savez(path, **{**arrays, "y_test": np.array([3], np.uint8)})
    _touch_later(path)
    with pytest.raises(CorruptFileError, match="checksum mismatch") as info:
        load("mnist")
    assert "banditkit data fetch mnist --force" in str(info.value)
    # truncated file
    path.write_bytes(path.read_bytes()[:100])
    _touch_later(path)
    with pytest.raises(CorruptFileError, match="banditkit data fetch mnist"):
        load("mnist")


def test_loading_needs_no_provenance_record_the_content_is_pinned(tmp_path, monkeypatch):
    """SOURCE.json is provenance, not the reference: without it intact data loads, tampered data is refused."""
    monkeypatch.setenv("BANDITKIT_DATA", str(tmp_path))
    path, arrays = _fake_cached_mnist(tmp_path, monkeypatch)
    (path.parent / "SOURCE.json").unlink()
    _touch_later(path)
    np.testing.assert_array_equal(load("mnist")["X_test"], arrays["X_test"])
    np.savez(path, **{**arrays, "X_test": np.zeros_like(arrays["X_test"])})
    _touch_later(path)  # a new file version even where the clock is coarser than the two writes
    with pytest.raises(CorruptFileError, match="checksum mismatch for dataset 'mnist'.*data fetch mnist --force"):
        load("mnist")


# ------------------------------------------------------------------------------------------------------------------
# checkpoints
# ------------------------------------------------------------------------------------------------------------------
def test_checkpoint_with_pickled_member_is_refused_and_not_run(tmp_path):
    marker = str(tmp_path / "PWNED")
    good = tmp_path / "good.npz"
    checkpoint.save(good, {"a": np.ones(2, np.float32)})
    evil = tmp_path / "evil.npz"
    with zipfile.ZipFile(good) as zin, zipfile.ZipFile(evil, "w") as zout:
        for name in zin.namelist():
            zout.writestr(name, zin.read(name))
        buf = io.BytesIO()
        np.save(buf, np.array([_Evil(os.system, f"touch {marker}")], dtype=object), allow_pickle=True)
        zout.writestr("['b'].npy", buf.getvalue())
    with pytest.raises(ValueError, match="pickled object data"):
        checkpoint.load(evil)
    assert not os.path.exists(marker)
