"""The README's quick tour runs as written (in a temporary directory, so its files land there)."""

import pathlib
import re
from decimal import ROUND_HALF_UP, Decimal

import numpy as np

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_readme_quick_tour_runs(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README.md has no python block"
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), ns)  # noqa: S102 - our own README
    assert (tmp_path / "regret.png").stat().st_size > 10_000
    assert (tmp_path / "run.bk").exists()
    assert np.all(np.isfinite(np.asarray(ns["mean"]))) and float(ns["cov"][0, 0]) > 0
    x_best, y_best = ns["opt"].best
    assert np.isfinite(y_best) and len(x_best) == 2
    assert set(ns["df"]["agent"]) == {"hilofi-ts", "linear-ts"}


# ---------------------------------------------------------------------------------------------- the front door
ROOT = README.parent
_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")


def _results_rows() -> list[list[str]]:
    text = README.read_text().split("\n## Results", 1)[1]
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("|---")]
    return [[c.strip() for c in line.strip().strip("|").split(" | ")] for line in rows[1:]]


def test_readme_is_short_with_one_short_line_per_result():
    size = len(README.read_bytes())  # bytes, the stricter count (±, ×, → are two or three bytes each)
    assert size <= 8000, f"README.md has {size} bytes (at most 8000: move detail to the docs or FINDINGS.md)"
    rows = _results_rows()
    assert len(rows) >= 10
    for cells in rows:
        assert len(cells) == 3 and max(map(len, cells)) <= 200, f"a Results cell over 200 characters: {cells}"


def test_readme_links_resolve():
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text()):
        if "://" not in target:
            assert (ROOT / target).exists(), f"README.md links to {target}, which does not exist"


def _numbers(text: str) -> list[str]:
    return [n.replace(",", "") for n in _NUMBER.findall(text)]


def test_every_result_number_is_in_the_table_its_row_links():
    """Each number of a Results row's result cell, as written (its decimals), is a number of a Markdown table the row
    links (rounded to those decimals): a row that falls behind a re-made table fails here."""
    for experiment, result, _ in _results_rows():
        sources = [ROOT / p for p in re.findall(r"\]\(([^)#\s]+\.md)\)", experiment)]
        assert sources, f"the row {experiment!r} links no committed table"
        found = {Decimal(n) for p in sources for n in _numbers(p.read_text())}
        for n in _numbers(re.sub(r"`[^`]*`", "", result)):
            unit = Decimal(1).scaleb(Decimal(n).as_tuple().exponent)  # 0.001 for "0.859", 1 for "4908"
            assert any(v.quantize(unit, ROUND_HALF_UP) == Decimal(n) for v in found), (
                f"README Results: {n} in the row {experiment!r} is in none of {[p.name for p in sources]}")
