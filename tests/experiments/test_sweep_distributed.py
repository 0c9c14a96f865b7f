"""bk.sweep placement: 4 host devices, and two real processes joined by jax.distributed, give the one-device frame.

The grid has 3 configurations × 2 seeds = 6 lanes, which 4 devices do not divide (padded to 8 lanes).  The
processes are real: two Python interpreters started here, joined through ``jax.distributed.initialize`` on a free
localhost port, exchanging results through JAX's CPU collectives (gloo).
"""

import json
import os
import socket
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pandas as pd
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_sweep import TinyBandit, model  # noqa: E402
from toys import REPO, TESTS_DIR  # noqa: E402

from banditkit.experiments.sweep import sweep  # noqa: E402

SPEC, STEPS, SEEDS, CHUNK = "ekf-ts", 24, [0, 1], 12
GRID = {"obs_noise": [0.05, 0.2, 0.8]}
COLS = ["obs_noise", "seed", "step"]


def run_grid(**kwargs):
    return sweep(SPEC, TinyBandit(), GRID, seeds=SEEDS, steps=STEPS, model=model(), chunk_size=CHUNK, progress=False,
                 **kwargs)


WORKER = textwrap.dedent(
    """
    import json, sys
    sys.path[:0] = [{here!r}, {tests!r}]
    pid = int(sys.argv[1])
    if pid >= 0:  # join the multi-process runtime before any JAX computation
        from banditkit.experiments.placement import initialize
        initialize("localhost:{port}", num_processes=2, process_id=pid)
    import jax
    from test_sweep_distributed import run_grid
    out = {out!r}
    df = run_grid(csv_path=out + "/written.csv")
    df.to_csv(out + f"/frame{{pid}}.csv", index=False)
    t = df.attrs["timing"]["ekf-ts"]
    print("JSON" + json.dumps(dict(devices=t["devices"], processes=t["processes"], padded=t["padded_lanes"],
                                   local=len(jax.local_devices()))))
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _env(devices: int) -> dict:
    """The workers' environment: the suite's compiler flags (tests/conftest.py) kept, the device count added."""
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}".strip()
    env = dict(os.environ, XLA_FLAGS=flags, JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = os.pathsep.join([REPO, env.get("PYTHONPATH", "")])
    return env


def _info(stdout: str) -> dict:
    return json.loads(stdout.split("JSON", 1)[1])


@pytest.fixture(scope="module")
def one_device():
    if len(jax.devices()) != 1:
        pytest.skip("the reference runs on one device")
    df = run_grid()
    assert df.attrs["timing"][SPEC]["devices"] == 1
    return df.sort_values(COLS).reset_index(drop=True)


def _same(frame: pd.DataFrame, ref: pd.DataFrame):
    """Identical rows; the regrets equal to float32 rounding (a different lane batch per device may round a
    batched reduction differently in the last bit)."""
    frame = frame.sort_values(COLS).reset_index(drop=True)
    assert len(frame) == len(ref) == len(GRID["obs_noise"]) * len(SEEDS) * STEPS
    for c in ["agent", "obs_noise", "seed", "step", "action", "reward"]:
        np.testing.assert_array_equal(frame[c].to_numpy(), ref[c].to_numpy(), err_msg=c)
    np.testing.assert_allclose(frame["cumulative_regret"], ref["cumulative_regret"], rtol=1e-6, atol=1e-6)


def test_four_host_devices_give_the_one_device_frame(one_device, tmp_path):
    code = WORKER.format(here=HERE, tests=TESTS_DIR, port=0, out=str(tmp_path))
    res = subprocess.run([sys.executable, "-c", code, "-1"], env=_env(4), capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    info = _info(res.stdout)
    assert (info["devices"], info["processes"], info["padded"]) == (4, 1, 8)  # 6 lanes padded to 8
    _same(pd.read_csv(tmp_path / "frame-1.csv"), one_device)
    _same(pd.read_csv(tmp_path / "written.csv"), one_device)


def test_two_processes_with_jax_distributed_give_the_one_device_frame(one_device, tmp_path):
    """Two processes of two devices each: one global mesh of 4 devices; each process runs 2 of the 8 lanes' pairs,
    both get the whole frame, and only process 0 writes the CSV."""
    code = WORKER.format(here=HERE, tests=TESTS_DIR, port=_free_port(), out=str(tmp_path))
    procs = [subprocess.Popen([sys.executable, "-c", code, str(pid)], env=_env(2), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for pid in (0, 1)]
    try:
        outs = [p.communicate(timeout=600) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    for _, (out, _) in zip(procs, outs, strict=True):
        info = _info(out)
        assert (info["devices"], info["processes"], info["local"], info["padded"]) == (4, 2, 2, 8)
    for pid in (0, 1):
        _same(pd.read_csv(tmp_path / f"frame{pid}.csv"), one_device)
    _same(pd.read_csv(tmp_path / "written.csv"), one_device)  # written once, by process 0
