"""Per-step speed of the posterior backends against the machine's own floor (issue 5, item 8).

What is timed: ``predict`` + ``update`` fused under one ``jax.jit`` (one observation per step, scalar Gaussian
output, float32), the protocol of ``shared/research/anchor-speed-reference.md`` (a new state buffer per step);
then the same window again with the state donated to the step (``donate_argnums=0``: updated in place, as inside
banditkit's runner), reported as ``donated ms`` and ``donated ratio``.  Neither is always faster: a new buffer per
step allocates (and page-faults) the whole state, a donated one lets XLA update in place but costs a copy wherever an
operand must outlive the in-place write (both are in ``speed.md``).  A low-rank block at ``q = 0`` leaves its basis
unchanged, so only the new-buffer protocol pays for it (a copy).  ``ratio`` uses the first (the anchor's protocol):

* compile time (``lower`` + ``compile``) is reported separately;
* ``--warmup`` steps on fresh random ``(x, y)``, then ``--steps`` timed steps, each ``block_until_ready``; the
  table reports the median (and the 10th percentile, which is less sensitive to other processes);
* the floor (:func:`floor_parts`, a roofline) is measured in the same process right before every backend's window:
  the median of ``--floor-reps`` jitted ``jax.grad`` calls of the model, plus the slower of ``2·P·(r+1)²`` flops at
  the GEMM rate of a jitted ``1024×1024 @ 1024×1024`` float32 matmul and ``2·4·P·(r+1)`` bytes (one read and one
  write of the ``P × (r+1)`` factor) at the streaming rate measured on an array of that size.  ``ratio = step /
  floor`` uses the medians of all the configuration's readings (single readings are noisy); ``ratio_gemm`` the
  floor without the memory term (the tables before 2026-12-02); the fitted exponent of step time in ``P`` over the
  MLPs from 100k parameters up is printed under the table (:func:`scaling_exponents`);
* the CPU time of *other* processes (``/proc/stat`` busy time minus this process's CPU time) is recorded for every
  window as ``other_cores``; before each window the script waits up to ``--idle-wait`` seconds for the machine to
  go quiet.  Numbers with ``other_cores`` above ~0.1 are not comparable with the anchor.

Configurations: ``LeNet5(out=1)`` (P = 60,941) at ranks ``--lenet-ranks`` (default 10 and 50) and MLPs on 10
inputs with about 10k, 100k, 300k and 1M parameters at rank 10.  Backends: the rank-based ones (hilofi, lolofi,
lrkf, lofi, subspace_ekf; ``hilofi_q1e-6`` = HiLoFi with q = 1e-6) at every rank, the others once per model;
``ekf`` only up to ``--ekf-max-params``.  BONG grid cells (linear-Hessian, ``BONG_CELLS``): ``bong_dlr`` / ``blr_dlr``
(DLR family, BONG and BLR rules; at every rank) and ``bong_diag`` / ``blr_diag`` (diagonal family, once per model).

Usage::

    python -m benchmarks speed            # full run (idle machine: ~15 min)
    python -m benchmarks speed --quick    # fewer steps, LeNet + 10k/100k MLPs
    python -m benchmarks speed --configs lenet --backends hilofi,lrkf --lenet-ranks 10,20,50,100
    python -m benchmarks speed --backends lrkf,lrkf-adaptive_noise --tag speed_adaptive_noise  # learned noise

``--windows W`` times every backend of a configuration in ``W`` windows interleaved across the backends (b1, b2, ...,
b1, b2, ...), each row the median over its windows, so that a slow spell of the machine hits every backend alike.
``--reference-dir DIR`` adds the HiLoFi authors' own HiLoFi and LRKF from a user's checkout of their repository
(``authors_hilofi``, ``authors_lrkf``; :mod:`benchmarks.peers.authors_lrlli`) to those windows, and the table ends
with their step time over banditkit's on the same model, floor and windows::

    python -m benchmarks speed --configs lenet --backends hilofi,lrkf --reference-dir ~/low-rank-last-layer-inference \
        --windows 8 --tag speed_authors

A backend name ending in ``-adaptive_noise`` times that backend wrapped by ``bk.posteriors.adaptive_noise`` (the
observation variance learned online).  Writes ``speed.csv`` (one row per backend × configuration; ``--tag`` renames
the three files), ``speed.md`` (the table, with the machine and the protocol) and ``speed.png`` (time vs P at
rank 10, log-log; time vs rank on LeNet) into ``--out``.
"""

from __future__ import annotations

import argparse
import inspect
import os
import platform
import sys
import time
import traceback

import jax
import jax.numpy as jnp
import numpy as np

import banditkit as bk
import banditkit.runtime
from banditkit.likelihoods import Gaussian
from banditkit.models.nets import MLP, LeNet5
from benchmarks.harness import options, plots, provenance
from benchmarks.peers import authors_lrlli

DEFAULT_BACKENDS = [
    "hilofi", "hilofi_q1e-6", "lolofi", "lrkf", "lofi", "diag_ekf", "subspace_ekf", "kalman_last_layer", "replay_sgd",
    "neural_linear", "ekf", "bong_dlr", "blr_dlr", "bong_diag", "blr_diag",
]  # fmt: skip
# Cells of the BONG grid (``bk.posteriors.bong``, linear-hessian estimator, default init_cov / learning rate 0.5):
# the DLR family (``bong_dlr`` is LoFi's update; ``blr_dlr`` truncates 2R + C columns) and the diagonal family
BONG_CELLS = {"bong_dlr": dict(rule="bong", family="dlr"), "blr_dlr": dict(rule="blr", family="dlr"),
              "bong_diag": dict(rule="bong", family="diag"), "blr_diag": dict(rule="blr", family="diag")}
RANKED = {"hilofi", "hilofi_q1e-6", "lolofi", "lrkf", "lofi", "subspace_ekf", "bong", "bong_dlr", "blr_dlr",
          *authors_lrlli.NAMES}
# ``hilofi_qQ``: HiLoFi with dynamics_cov = Q on both blocks (the paper's MNIST agent: 1e-6); with q_ℓ > 0 its
# default last_cov="auto" keeps the last layer as a dense covariance (O(D_ℓ²) time update), unlike q = 0's square root
MLP_SIZES = {"mlp10k": (96, 96), "mlp100k": (310, 310), "mlp300k": (540, 540), "mlp1m": (1000, 1000)}


# ------------------------------------------------------------------------------------------------ machine load
def _busy_jiffies() -> tuple[float, float]:
    """``(busy, total)`` jiffies of all CPUs from ``/proc/stat`` (0, 0 where unavailable)."""
    try:
        with open("/proc/stat") as f:
            v = [float(t) for t in f.readline().split()[1:]]
        idle = v[3] + (v[4] if len(v) > 4 else 0.0)
        return sum(v) - idle, sum(v)
    except OSError:
        return 0.0, 0.0


class LoadMeter:
    """Cores used by *other* processes over a window: ``/proc/stat`` busy time minus this process's CPU time."""

    def __enter__(self):
        self.b0, _ = _busy_jiffies()
        self.c0 = time.process_time()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        b1, _ = _busy_jiffies()
        hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        wall = max(time.perf_counter() - self.t0, 1e-9)
        self.other_cores = max(((b1 - self.b0) / hz - (time.process_time() - self.c0)) / wall, 0.0)
        return False


def wait_idle(max_wait: float, threshold: float = 0.1) -> float:
    """Wait (at most ``max_wait`` s) for a 1 s window in which other processes use < ``threshold`` cores."""
    t_end = time.perf_counter() + max_wait
    other = float("nan")
    while True:
        with LoadMeter() as m:
            time.sleep(min(1.0, max(max_wait, 0.05)))
        other = m.other_cores
        if other < threshold or time.perf_counter() >= t_end:
            return other


# ------------------------------------------------------------------------------------------------------ floor
def _median_time(fn, *args, reps: int) -> float:
    jax.block_until_ready(fn(*args))
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


FLOAT_BYTES = 4  # float32
STREAM_REPS = 8  # chained passes per timed call of the streaming and the mixing measurements (Floor)


def floor_parts(grad_s: float, gemm_flops: float, stream_bytes: float, num_params: int, rank: int) -> dict:
    """The per-step floor of a rank-``r`` filter over ``P`` parameters, in ms, from rates measured on this machine.

    ``gemm = 2·P·(r+1)²`` flops at the GEMM rate (the ``(r+1)``-column products a low-rank step cannot avoid);
    ``bytes = 2·4·P·(r+1)`` bytes (one read and one write of a ``P × (r+1)`` float32 factor) at the streaming rate
    measured on an array of that size (so a factor that fits in cache is charged the cache's rate, one that does
    not the memory's).  ``floor = grad + max(gemm, bytes)`` (a roofline: the step is bound by whichever of
    arithmetic and memory traffic is slower); ``floor_gemm = grad + gemm``, the suite's floor before the memory
    term (for comparison with older tables).  Returns ``dict(floor_ms, floor_gemm_ms, gemm_ms, bytes_ms)``.
    """
    flops = 2.0 * num_params * (rank + 1) ** 2
    nbytes = 2.0 * FLOAT_BYTES * num_params * (rank + 1)
    gemm_ms, bytes_ms, grad_ms = 1e3 * flops / gemm_flops, 1e3 * nbytes / stream_bytes, 1e3 * grad_s
    return dict(floor_ms=grad_ms + max(gemm_ms, bytes_ms), floor_gemm_ms=grad_ms + gemm_ms, gemm_ms=gemm_ms,
                bytes_ms=bytes_ms)


class Floor:
    """The floor's three rates, measured now: the jitted ``grad`` of the model, the 1024² float32 GEMM rate, and
    the streaming rate (read + write) over a ``P × (r+1)`` float32 array (:func:`floor_parts`); and, beside the
    floor, the time of one ``(r+1, r+1) @ (r+1, P)`` product (see :meth:`measure`)."""

    def __init__(self, model, params, x, reps: int, num_params: int = 1 << 16, rank: int = 10):
        self.grad = jax.jit(jax.grad(lambda p, xx: model.apply(p, xx)[0]))
        self.params, self.x, self.reps = params, x, reps
        self.mat = jax.random.normal(jax.random.PRNGKey(7), (1024, 1024), jnp.float32)
        self.mm = jax.jit(lambda a: a @ a)
        self.buf = jnp.ones((num_params * (rank + 1),), jnp.float32)
        q, _ = jnp.linalg.qr(jax.random.normal(jax.random.PRNGKey(8), (rank + 1, rank + 1), jnp.float32))
        self.small, self.fac = q, self.buf.reshape(rank + 1, num_params)  # q orthogonal: the chain keeps its norms
        # n passes chained in one call (a loop XLA cannot merge); the time per pass is the difference between
        # 2·STREAM_REPS and STREAM_REPS passes over STREAM_REPS, so neither the dispatch nor the copy of the input
        # into the loop is counted; unroll=2 lets each product write into the buffer two products back (no copy)
        self.stream = {n: jax.jit(lambda a, n=n: jax.lax.fori_loop(0, n, lambda i, x: x * 1.5 - 0.5, a))
                       for n in (STREAM_REPS, 2 * STREAM_REPS)}
        self.mix = {n: jax.jit(lambda w, c, n=n: jax.lax.fori_loop(0, n, lambda i, x: w @ x, c, unroll=2))
                    for n in (STREAM_REPS, 2 * STREAM_REPS)}

    def _per_pass(self, fns: dict, *args) -> float:
        reps = max(self.reps // 2, 5)
        t1, t2 = (_median_time(fns[n], *args, reps=reps) for n in (STREAM_REPS, 2 * STREAM_REPS))
        return max(t2 - t1, 1e-9) / STREAM_REPS

    def measure(self) -> tuple[float, float, float, float]:
        """``(grad seconds, GEMM flop/s, streaming bytes/s, mix seconds)``: ``streaming`` = one read and one write of
        the ``P × (r+1)`` buffer; ``mix`` = one ``(r+1, r+1) @ (r+1, P)`` float32 product (beside the floor, not part
        of it: how near XLA's own GEMM gets to the roofline at the step's shape); both per pass of a chain in one
        call."""
        g = _median_time(self.grad, self.params, self.x, reps=self.reps)
        t = _median_time(self.mm, self.mat, reps=max(self.reps // 2, 5))
        ts = self._per_pass(self.stream, self.buf)
        tm = self._per_pass(self.mix, self.small, self.fac)
        return g, 2 * 1024**3 / t, 2 * FLOAT_BYTES * self.buf.size / ts, tm


# ----------------------------------------------------------------------------------------------------- models
def make_config(name: str):
    """``(model, params, x_dim)``."""
    if name == "lenet":
        model, din = LeNet5(out=1), 784
    else:
        model, din = MLP(features=MLP_SIZES[name], out=1), 10
    params = model.init(jax.random.PRNGKey(0), jnp.zeros(din, jnp.float32))
    return model, params, din


def make_backend(name: str, model, params, rank: int, x0, num_params: int):
    """A ``Posterior`` for ``name`` at this size with benchmark settings, or raise to skip it."""
    if name == "subspace_ekf":
        from banditkit.posteriors.subspace import subspace_ekf, subspace_random

        basis, offset = subspace_random(jax.random.PRNGKey(3), params, rank)
        return subspace_ekf(model.apply, Gaussian(0.1), basis=basis, offset=offset)
    if name in BONG_CELLS:
        return bk.posteriors.bong(model.apply, Gaussian(0.1), rank=rank, **BONG_CELLS[name])
    kw = {}
    name, learns = bk.posteriors.split_suffix(name)  # "lrkf-adaptive_noise": the noise variance learned online
    if name.startswith("hilofi_q"):
        name, kw["dynamics_cov"] = "hilofi", float(name[len("hilofi_q"):])
    factory = bk.posteriors.adaptive_noise(name) if learns else bk.posteriors.get(name)
    sig = inspect.signature(factory).parameters
    if "rank" in sig:
        kw["rank"] = rank
    if "rank_last" in sig and name == "lolofi":
        kw["rank_last"] = rank
    if "example_x" in sig:
        kw["example_x"] = x0
    if name == "bong":
        kw["family"] = "dlr"
    return factory(model.apply, Gaussian(0.1), **kw)


def time_backend(post, params, din: int, warmup: int, steps: int, seed: int = 0, donate: bool = False) -> dict:
    """Compile seconds, then per-step seconds of the fused predict+update (median / p10 / min)."""
    state = post.init(params)
    step = jax.jit(lambda s, x, y: post.update(post.predict(s), x, y), donate_argnums=(0,) if donate else ())
    n = warmup + steps
    xs = jax.random.normal(jax.random.PRNGKey(seed + 1), (n, din), jnp.float32)
    ys = jax.random.normal(jax.random.PRNGKey(seed + 2), (n, 1), jnp.float32)
    t0 = time.perf_counter()
    compiled = step.lower(state, xs[0], ys[0]).compile()
    compile_s = time.perf_counter() - t0
    for i in range(warmup):
        state = compiled(state, xs[i], ys[i])
    jax.block_until_ready(state)
    ts = []
    with LoadMeter() as m:
        for i in range(warmup, n):
            t0 = time.perf_counter()
            state = compiled(state, xs[i], ys[i])
            jax.block_until_ready(state)
            ts.append(time.perf_counter() - t0)
    finite = all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in jax.tree_util.tree_leaves(state)
                 if jnp.issubdtype(jnp.asarray(leaf).dtype, jnp.floating))  # fmt: skip
    ts = np.asarray(ts)
    return dict(compile_s=compile_s, step_ms=1e3 * np.median(ts), step_p10_ms=1e3 * np.percentile(ts, 10),
                step_min_ms=1e3 * ts.min(), other_cores_step=m.other_cores, finite=finite)  # fmt: skip


def _time_window(b: str, model, params, rank: int, x0, num_params: int, din: int, floor: Floor, args) -> dict:
    """One timing window of backend ``b``: wait for quiet, the floor, then its step (fresh and donated state)."""
    row: dict = {}
    try:
        if b in authors_lrlli.NAMES:
            post = authors_lrlli.make(b, args.reference_dir, model.apply, params, rank)
        else:
            post = make_backend(b, model, params, rank, x0, num_params)
        row["other_cores_idle_wait"] = wait_idle(args.idle_wait)
        with LoadMeter() as fm:
            g, peak, bw, mix = floor.measure()
        row.update(grad_ms=1e3 * g, gemm_gflops=peak / 1e9, stream_gbs=bw / 1e9, mix_ms=1e3 * mix,
                   other_cores_floor=fm.other_cores)
        row["floor_window_ms"] = floor_parts(g, peak, bw, num_params, rank)["floor_ms"]
        row.update(time_backend(post, params, din, args.warmup, args.steps, donate=False))
        if b not in authors_lrlli.NAMES:  # their filters are timed as the anchor did, on a fresh state per step
            row["donated_ms"] = time_backend(post, params, din, args.warmup, args.steps, donate=True)["step_ms"]
        row["note"] = "" if row["finite"] else "state not finite after the timed steps"
    except Exception as e:  # noqa: BLE001 - one backend failing must not stop the benchmark
        row["note"] = f"error: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
        if args.verbose:
            traceback.print_exc()
    return row


def _merge_windows(ws: list[dict]) -> dict:
    """One row from a backend's windows: the median of each timing over the windows that ran, the largest
    ``other_cores``, the first compile time, every floor reading (for the configuration's median floor), and
    ``windows`` = how many ran; the first error's note when none ran."""
    ok = [w for w in ws if "step_ms" in w]
    if not ok:
        return dict(note=ws[0].get("note", "")) if ws else {}
    out = dict(ok[0])
    for k in ("step_ms", "step_p10_ms", "step_min_ms", "donated_ms", "grad_ms", "gemm_gflops", "stream_gbs",
              "mix_ms", "floor_window_ms"):
        vals = [w[k] for w in ok if k in w]
        if vals:
            out[k] = float(np.median(vals))
    for k in ("other_cores_step", "other_cores_floor", "other_cores_idle_wait"):
        vals = [w[k] for w in ok if w.get(k) is not None]
        out[k] = max(vals) if vals else None
    out["finite"] = all(w["finite"] for w in ok)
    out["note"] = "" if out["finite"] else "state not finite after the timed steps"
    out["windows"] = len(ok)
    return out


# -------------------------------------------------------------------------------------------------------- run
def run(args, on_config=None) -> list[dict]:
    configs = []
    names = args.configs.split(",")
    if "lenet" in names:
        configs += [("lenet", r) for r in args.lenet_ranks]
    configs += [(c, 10) for c in names if c in MLP_SIZES]
    backends = args.backends.split(",") if args.backends != "all" else sorted({*bk.posteriors.REGISTRY, "subspace_ekf"})
    have = set(bk.posteriors.REGISTRY) | ({"subspace_ekf"} if hasattr(bk.posteriors, "subspace_ekf") else set())
    rows = []
    for cname, rank in configs:
        model, params, din = make_config(cname)
        num_params = int(sum(np.size(leaf) for leaf in jax.tree_util.tree_leaves(params)))
        x0 = jnp.zeros(din, jnp.float32)
        floor = Floor(model, params, x0 + 0.1, args.floor_reps, num_params=num_params, rank=rank)
        first_rank = rank == min(r for c, r in configs if c == cname)
        config_rows = []
        for b in backends:
            row = dict(config=cname, params=num_params, rank=rank, backend=b)
            base = bk.posteriors.split_suffix(b)[0]
            if base.split("_q")[0] not in have and base not in BONG_CELLS and base not in authors_lrlli.NAMES:
                continue
            if base not in RANKED and not first_rank:
                continue  # rank-independent: timed once per model
            if b == "ekf" and num_params > args.ekf_max_params:
                row["note"] = f"skipped: P > {args.ekf_max_params} (P×P covariance)"
                rows.append(row)
                continue
            config_rows.append(row)
        # --windows W: the backends' windows interleaved (b1, b2, ..., b1, b2, ...), each row the median over its W
        windows: dict[str, list[dict]] = {r["backend"]: [] for r in config_rows}
        for _ in range(args.windows):
            for row in config_rows:
                windows[row["backend"]].append(_time_window(row["backend"], model, params, rank, x0, num_params, din,
                                                            floor, args))
        for row in config_rows:
            row.update(_merge_windows(windows[row["backend"]]))
            print(_fmt_row(row), flush=True)
            rows.append(row)
        # ratio against the median floor of this configuration: the median of every window's three rates
        done = [w for ws in windows.values() for w in ws if "grad_ms" in w]
        if done:
            med = {k: float(np.median([w[k] for w in done]))
                   for k in ("grad_ms", "gemm_gflops", "stream_gbs", "mix_ms")}
            parts = floor_parts(med["grad_ms"] / 1e3, med["gemm_gflops"] * 1e9, med["stream_gbs"] * 1e9, num_params,
                                rank)
            for r in config_rows:
                r.update(parts, grad_med_ms=med["grad_ms"], gemm_med_gflops=med["gemm_gflops"],
                         stream_med_gbs=med["stream_gbs"], mix_med_ms=med["mix_ms"])
                if "step_ms" in r:
                    r["ratio"] = r["step_ms"] / parts["floor_ms"]
                    r["ratio_p10"] = r["step_p10_ms"] / parts["floor_ms"]
                    r["ratio_gemm"] = r["step_ms"] / parts["floor_gemm_ms"]
                    r["ratio_mix"] = r["step_ms"] / (med["grad_ms"] + med["mix_ms"])
                    if r.get("donated_ms") is not None and np.isfinite(r["donated_ms"]):
                        r["ratio_donated"] = r["donated_ms"] / parts["floor_ms"]
        if on_config is not None:
            on_config(rows)  # incremental outputs: a stopped run keeps the configurations it finished
    return rows


def _fmt_row(r: dict) -> str:
    if "step_ms" in r:
        return (f"{r['config']:>8} P={r['params']:>9,} r={r['rank']:>3} {r['backend']:>18}: "
                f"{r['step_ms']:9.2f} ms (p10 {r['step_p10_ms']:.2f}), compile {r['compile_s']:.1f} s, "
                f"floor(window) {r['floor_window_ms']:.2f} ms, other cores {r['other_cores_step']:.2f}")  # fmt: skip
    return f"{r['config']:>8} P={r['params']:>9,} r={r['rank']:>3} {r['backend']:>18}: {r.get('note', '')}"


COLUMNS = [
    "config", "params", "rank", "backend", "step_ms", "step_p10_ms", "step_min_ms", "donated_ms", "compile_s",
    "floor_ms", "ratio", "ratio_p10", "ratio_donated", "floor_gemm_ms", "ratio_gemm", "gemm_ms", "bytes_ms", "grad_ms",
    "gemm_gflops", "stream_gbs", "mix_ms", "floor_window_ms", "grad_med_ms", "gemm_med_gflops", "stream_med_gbs",
    "mix_med_ms", "ratio_mix",
    "other_cores_step", "other_cores_floor", "other_cores_idle_wait", "finite", "windows", "note",
]  # fmt: skip
#: the authors' filter and banditkit's backend it is compared with, in the same windows
SAME_RUN = {"authors_hilofi": "hilofi", "authors_lrkf": "lrkf"}
_LABEL = {"hilofi": "HiLoFi", "lrkf": "LRKF"}


def write_outputs(rows: list[dict], out: str, args) -> None:
    import pandas as pd

    os.makedirs(out, exist_ok=True)
    df = pd.DataFrame(rows)
    for c in COLUMNS:
        if c not in df:
            df[c] = np.nan
    df = df[COLUMNS]
    df.to_csv(os.path.join(out, f"{args.tag}.csv"), index=False)
    one, fifteen = provenance.load_average(1), provenance.load_average(15)
    load = f"; load average {one:.1f} / {fifteen:.1f} (1 / 15 min) when written" if one is not None else ""
    lines = [
        "# Per-step speed: predict + update under one jax.jit",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs ({platform.processor() or 'cpu'}) shared with other "
        f"jobs{load}; jax {jax.__version__} on {jax.default_backend()}"
        + provenance.commit_note()
        + "; float32; one observation per step, scalar Gaussian output (R = 0.1); a new state buffer per step "
        + "(`donated ms`: the state donated to the step, updated in place as in the runner)"
        + f". {args.warmup} warm-up + {args.steps} timed steps per backend and window, "
        + f"{getattr(args, 'windows', 1)} window(s) per backend interleaved across the backends (each row: the median "
        + "over its windows); compile time separate. "
        + f"Allocator: {getattr(args, 'malloc', 'glibc defaults')}; {provenance.blas_note()}.",
        "",
        f"Command: `{provenance.suite_command('speed', args.argv)}`",
        "",
        "Floor = the median jitted `grad` of the model + max(2·P·(r+1)² flops at the 1024² GEMM rate, 2·4·P·(r+1) "
        "bytes at the streaming rate over a P×(r+1) float32 array) — a roofline: one read and one write of the "
        "stacked factor, or its products, whichever is slower here (`floor_parts`); all three rates re-measured before "
        "every backend window, the floor from their medians over the configuration (table below the main one). "
        "`ratio` = median step / floor; `ratio p10` uses the 10th-percentile step; `donated ratio` = donated ms / "
        "floor (the state updated in place, as the runner's compiled loop does); `GEMM ratio` = median step / (grad "
        "+ GEMM term only), the floor of the tables before 2026-12-02. `other` = cores used by other processes during "
        "the timed window (0 on an idle machine); rows with other > 0.1 are not comparable to the anchor "
        "(`shared/research/anchor-speed-reference.md`: reference HiLoFi r50 on LeNet 26–27 ms, ratio ≈ 10).",
        "",
        "| config | P | rank | backend | step ms (median) | step ms (p10) | donated ms (median) | compile s | "
        "floor ms | ratio | ratio p10 | donated ratio | GEMM ratio | other | note |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]

    def f(v, fmt):
        return "" if v is None or (isinstance(v, float) and np.isnan(v)) else format(v, fmt)

    for r in df.to_dict("records"):
        lines.append(
            f"| {r['config']} | {r['params']:,} | {r['rank']} | {r['backend']} | {f(r['step_ms'], '.2f')} | "
            f"{f(r['step_p10_ms'], '.2f')} | {f(r.get('donated_ms'), '.2f')} | {f(r['compile_s'], '.1f')} | "
            f"{f(r['floor_ms'], '.2f')} | "
            f"{f(r['ratio'], '.2f')} | {f(r['ratio_p10'], '.2f')} | {f(r.get('ratio_donated'), '.2f')} | "
            f"{f(r['ratio_gemm'], '.2f')} | "
            f"{f(r['other_cores_step'], '.2f')} | {'' if not isinstance(r['note'], str) else r['note']} |"
        )
    lines += floor_lines(df) + scaling_lines(df) + same_run_lines(df)
    with open(os.path.join(out, f"{args.tag}.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    _plot(df, os.path.join(out, f"{args.tag}.png"))


def floor_lines(df) -> list[str]:
    """Markdown: each configuration's floor and the rates it was made of (one row per configuration)."""
    g = df[df["floor_ms"].notna()].drop_duplicates(["config", "rank"])
    if g.empty:
        return []
    out = ["", "**The floor of each configuration** (medians over its windows; the last two columns time XLA's own "
           "product of the step's shape, the mixing of the stacked factor that every low-rank step does, beside "
           "the grad — a reference for how near the roofline that product itself gets, not the floor):", "",
           "| config | P | rank | grad ms | GEMM GFLOP/s | stream GB/s | GEMM term ms | bytes term ms | floor ms | "
           "GEMM-only floor ms | (r+1)² × (r+1)·P product ms | grad + product ms |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in g.to_dict("records"):
        out.append(f"| {r['config']} | {r['params']:,} | {r['rank']} | {r['grad_med_ms']:.3f} | "
                   f"{r['gemm_med_gflops']:.1f} | {r['stream_med_gbs']:.1f} | {r['gemm_ms']:.3f} | "
                   f"{r['bytes_ms']:.3f} | "
                   f"{r['floor_ms']:.2f} | {r['floor_gemm_ms']:.2f} | {r['mix_med_ms']:.3f} | "
                   f"{r['grad_med_ms'] + r['mix_med_ms']:.2f} |")
    return out


def scaling_exponents(df, min_params: int = 90_000, rank: int = 10) -> dict[str, float]:
    """Least-squares slope of ``log(step ms)`` on ``log P`` over the MLP configurations with ``P ≥ min_params`` at
    ``rank`` (1 = time linear in P), per backend, and for the floor under the key ``"floor"``; backends timed on
    fewer than two such sizes are left out."""
    sel = df[df["config"].str.startswith("mlp") & (df["rank"] == rank) & (df["params"] >= min_params)]
    out = {}
    floors = sel[sel["floor_ms"].notna()].drop_duplicates("config").assign(step_ms=lambda d: d["floor_ms"])
    for name, g in [*sel.groupby("backend"), ("floor", floors)]:
        g = g[np.isfinite(g["step_ms"].astype(float))]
        if g["params"].nunique() >= 2:
            out[name] = float(np.polyfit(np.log(g["params"].astype(float)), np.log(g["step_ms"].astype(float)), 1)[0])
    return out


def scaling_lines(df) -> list[str]:
    """Markdown: the fitted exponents of :func:`scaling_exponents` (none when fewer than two MLP sizes ran)."""
    ex = scaling_exponents(df)
    if not ex:
        return []
    floor = ex.pop("floor", None)
    head = "**Growth with P at rank 10** (MLPs from 100k to 1M parameters; step ∝ P^k, k fitted by least squares"
    head += f"; the floor's own k = {floor:.2f}):" if floor is not None else "):"
    return ["", head, "", "; ".join(f"{b} {k:.2f}" for b, k in sorted(ex.items()))]


def same_run_lines(df) -> list[str]:
    """Markdown lines: per configuration, how many times slower the authors' filter was than banditkit's backend
    timed in the same interleaved windows (``authors ms / banditkit ms``); none when no authors' row ran."""
    out = []
    for (cname, rank), g in df.groupby(["config", "rank"], sort=False):
        by = {r["backend"]: r for r in g.to_dict("records")}
        for theirs, ours in SAME_RUN.items():
            a, b = by.get(theirs, {}).get("step_ms"), by.get(ours, {}).get("step_ms")
            if a is None or b is None or not (np.isfinite(a) and np.isfinite(b)):
                continue
            out.append(f"- {cname}, rank {rank}, {_LABEL[ours]}: the authors' {a:.2f} ms, banditkit's {b:.2f} ms per "
                       f"step; authors / banditkit = {a / b:.2f}")
    if out:
        out = ["", "**Same run, the authors' code (`--reference-dir`) against banditkit's:**", "", *out]
    return out


def _plot(df, path: str) -> None:
    """Left: time vs P at rank 10 over the MLP sweep (LeNet5 is a CNN of another shape, so it is left out of the
    line); right: time vs rank on LeNet5.  Each backend keeps one colour and marker in both panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = df[df["step_ms"].notna()]
    names = sorted(ok["backend"].unique())
    style = {b: dict(color=c, marker="osD^v<>ph*X"[i % 11])
             for i, (b, c) in enumerate(zip(names, plots.method_colours(len(names)), strict=True))}
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.6))
    r10 = ok[(ok["rank"] == 10) & ok["config"].str.startswith("mlp")]
    for b, g in r10.groupby("backend"):
        g = g.sort_values("params")
        a1.plot(g["params"], g["step_ms"], "-", ms=5, label=b, **style[b])
    fl = r10.drop_duplicates("config").sort_values("params")
    if len(fl):
        a1.plot(fl["params"], fl["floor_ms"], "k--", lw=2, label="floor")
    a1.set(xscale="log", yscale="log", xlabel="parameters P (MLPs on 10 inputs)", ylabel="ms per predict+update",
           title="rank 10: time vs P (linear in P = slope 1)")
    a1.grid(True, which="both", alpha=0.2)
    if a1.get_legend_handles_labels()[0]:
        a1.legend(fontsize=7, ncol=2)
    le = ok[ok["config"] == "lenet"]
    for b, g in le.groupby("backend"):
        g = g.sort_values("rank")
        if g["rank"].nunique() > 1:
            a2.plot(g["rank"], g["step_ms"], "-", ms=5, label=b, **style[b])
    fl = le.drop_duplicates("rank").sort_values("rank")
    if len(fl):
        a2.plot(fl["rank"], fl["floor_ms"], "k--", lw=2, label="floor")
    a2.set(xlabel="rank", ylabel="ms per predict+update", title="LeNet5 (P = 60,941): time vs rank", yscale="log")
    a2.grid(True, which="both", alpha=0.2)
    if a2.get_legend_handles_labels()[0]:
        a2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=options.RESULTS)
    ap.add_argument("--configs", default="lenet,mlp10k,mlp100k,mlp300k,mlp1m")
    ap.add_argument("--lenet-ranks", default="10,50", type=lambda s: [int(v) for v in s.split(",")])
    ap.add_argument("--backends", default=",".join(DEFAULT_BACKENDS), help="comma list, or 'all'")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--floor-reps", type=int, default=30)
    ap.add_argument("--idle-wait", type=float, default=3.0, help="max seconds to wait for an idle machine")
    ap.add_argument("--ekf-max-params", type=int, default=3000)
    ap.add_argument("--windows", type=int, default=1,
                    help="timing windows per backend, interleaved across the backends of a configuration (b1, b2, "
                         "..., b1, b2, ...); each row reports the median over its windows")
    ap.add_argument("--reference-dir", default=None,
                    help="a checkout of the HiLoFi authors' code (gerdm/low-rank-last-layer-inference): adds their "
                         "HiLoFi and LRKF (authors_hilofi, authors_lrkf) to the rank-based configurations, timed in "
                         "the same windows (benchmarks/peers/authors_lrlli.py)")
    ap.add_argument("--quick", action="store_true", help="5 warm-up + 10 timed steps; LeNet, 10k and 100k MLPs")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--tag", default="speed", help="output names: TAG.csv, TAG.md, TAG.png (default speed)")
    ap.add_argument("--keep-freed-memory", action="store_true",
                    help="call banditkit.runtime.keep_freed_memory() first (faster for factors above 32 MiB, slower "
                         "for small ones)")
    options.add_blas_threads(ap)
    args = ap.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    options.apply_blas_threads(args.blas_threads)
    args.malloc = "glibc defaults"
    if args.keep_freed_memory:
        kept = banditkit.runtime.keep_freed_memory()
        args.malloc = ("large blocks kept for reuse (banditkit.runtime.keep_freed_memory)" if kept
                       else "glibc defaults (keep_freed_memory not available here)")
    if args.quick:
        args.warmup, args.steps, args.floor_reps, args.idle_wait = 5, 10, 10, 0.5
        if args.configs == ap.get_default("configs"):
            args.configs = "lenet,mlp10k,mlp100k"
    if args.windows < 1:
        ap.error(f"--windows must be >= 1, got {args.windows}")
    if args.reference_dir is not None:
        try:
            authors_lrlli.load_modules(args.reference_dir)  # a wrong folder or a missing dependency fails here
        except (FileNotFoundError, ImportError) as e:
            ap.error(str(e))
        extra = [n for n in authors_lrlli.NAMES if n not in args.backends.split(",")]
        args.backends = ",".join([*args.backends.split(","), *extra])
    rows = run(args, on_config=lambda rows: write_outputs(rows, args.out, args))
    write_outputs(rows, args.out, args)
    print(f"wrote {args.out}/{args.tag}.csv, {args.tag}.md, {args.tag}.png")
