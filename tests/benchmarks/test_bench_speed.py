"""benchmarks.suites.speed: the roofline floor and the fitted growth exponent against hand-computed answers, and
one tiny run of the suite end to end (the timings themselves are the suite's results, not asserted here)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from benchmarks.suites import speed


def test_floor_is_grad_plus_the_slower_of_arithmetic_and_memory_traffic():
    p, r = 1_000_000, 10
    # 2·P·121 = 242 MFLOP at 121 GFLOP/s = 2 ms; 2·4·P·11 = 88 MB at 22 GB/s = 4 ms: memory-bound
    parts = speed.floor_parts(0.5e-3, 121e9, 22e9, p, r)
    assert parts["gemm_ms"] == pytest.approx(2.0) and parts["bytes_ms"] == pytest.approx(4.0)
    assert parts["floor_ms"] == pytest.approx(4.5) and parts["floor_gemm_ms"] == pytest.approx(2.5)
    # the same factor streamed from cache at 88 GB/s: 1 ms, so the arithmetic bounds the step
    parts = speed.floor_parts(0.5e-3, 121e9, 88e9, p, r)
    assert parts["bytes_ms"] == pytest.approx(1.0) and parts["floor_ms"] == pytest.approx(2.5)
    assert parts["floor_ms"] == parts["floor_gemm_ms"]


def test_growth_exponent_recovers_known_powers_of_p():
    sizes = {"mlp10k": 10_000, "mlp100k": 100_000, "mlp300k": 300_000, "mlp1m": 1_000_000}
    rows = []
    for cfg, p in sizes.items():
        rows.append(dict(config=cfg, params=p, rank=10, backend="lin", step_ms=2e-5 * p, floor_ms=1e-5 * p))
        rows.append(dict(config=cfg, params=p, rank=10, backend="sup", step_ms=1e-7 * p**1.5, floor_ms=1e-5 * p))
    rows.append(dict(config="lenet", params=60_941, rank=10, backend="lin", step_ms=1e9, floor_ms=1.0))  # not an MLP
    rows.append(dict(config="mlp1m", params=1_000_000, rank=10, backend="once", step_ms=3.0, floor_ms=10.0))
    for cfg, p in sizes.items():  # a skipped backend's row comes first and has no floor: it must not hide the floor
        rows.insert(0, dict(config=cfg, params=p, rank=10, backend="ekf", step_ms=np.nan, floor_ms=np.nan))
    ex = speed.scaling_exponents(pd.DataFrame(rows))
    assert ex["lin"] == pytest.approx(1.0) and ex["sup"] == pytest.approx(1.5) and ex["floor"] == pytest.approx(1.0)
    assert "once" not in ex  # one size: no slope
    # the 10k MLP is below min_params: a different power there must not move the fit
    next(r for r in rows if r["backend"] == "lin" and r["config"] == "mlp10k")["step_ms"] = 1e3
    assert speed.scaling_exponents(pd.DataFrame(rows))["lin"] == pytest.approx(1.0)
    assert "step ∝ P^k" in speed.scaling_lines(pd.DataFrame(rows))[1]


def test_a_tiny_run_writes_the_floor_its_rates_and_the_ratios(tmp_path):
    out = tmp_path / "o"
    speed.main(["--configs", "mlp10k", "--backends", "lrkf,diag_ekf", "--warmup", "1", "--steps", "3",
                "--floor-reps", "3", "--idle-wait", "0", "--out", str(out), "--tag", "t"])  # fmt: skip
    df = pd.read_csv(out / "t.csv")
    assert set(df.backend) == {"lrkf", "diag_ekf"}
    for r in df.to_dict("records"):
        assert r["stream_gbs"] > 0 and r["gemm_gflops"] > 0 and r["grad_ms"] > 0
        parts = speed.floor_parts(r["grad_med_ms"] / 1e3, r["gemm_med_gflops"] * 1e9, r["stream_med_gbs"] * 1e9,
                                  r["params"], r["rank"])  # fmt: skip
        assert r["floor_ms"] == pytest.approx(parts["floor_ms"]) and r["floor_ms"] >= r["floor_gemm_ms"]
        assert r["ratio"] == pytest.approx(r["step_ms"] / r["floor_ms"])
        assert r["ratio_gemm"] == pytest.approx(r["step_ms"] / r["floor_gemm_ms"])
        assert r["ratio_donated"] == pytest.approx(r["donated_ms"] / r["floor_ms"])
        assert math.isfinite(r["ratio"]) and np.isfinite(r["step_p10_ms"])
    md = (out / "t.md").read_text()
    assert "**The floor of each configuration**" in md and "| mlp10k | 10,465 | 10 |" in md
