"""benchmarks.harness.provenance.package_versions(): a suite that races peers names their installed versions in its
machine line (a peer's results change between releases), and says so when one is missing."""

from __future__ import annotations

from importlib import metadata

from benchmarks.harness import provenance


def test_machine_line_names_installed_and_missing_packages():
    line = provenance.machine(load=False, packages=("numpy", "no-such-distribution-xyz"))
    assert f", numpy {metadata.version('numpy')}," in line
    assert "no-such-distribution-xyz not installed" in line
    assert provenance.package_versions(()) == ""
    assert provenance.row_provenance(("numpy",))["machine"] == provenance.machine(load=False, packages=("numpy",))
