"""The status page (``GET /``) of the real server, rendered by a real headless browser (Debian's ``chromium``).

The server takes a few seconds of traffic (rewards favour one action); Chromium loads the page, its DOM is checked
(counts, the charts' lines, the value table) and a screenshot is taken.  ``BANDITKIT_SERVE_SCREENSHOT=PATH`` keeps the
screenshot there (``docs/img/serve_status.png`` is made so).  Without Chromium the test skips — except when
``BANDITKIT_REQUIRE_BROWSER=1`` (CI installs Chromium and sets it), where it fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time

import numpy as np
import pytest

pytest.importorskip("uvicorn")

from banditkit.serve.process import ServerProcess  # noqa: E402

ARGS = ["--agent", "linear-thompson", "--context-dim", "2", "--action-dim", "3", "--max-actions", "4",
        "--max-batch", "2", "--learn-batch", "2", "--draws", "16"]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("BANDITKIT_REQUIRE_BROWSER") == "1":
        pytest.fail("BANDITKIT_REQUIRE_BROWSER=1 but no chromium on PATH (apt-get install -y chromium)")
    pytest.skip("no chromium on PATH (apt-get install -y chromium); CI requires it")


def _browser(exe: str, profile: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([exe, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                          timeout=120)


def test_status_page_in_a_headless_browser(tmp_path):
    exe = _chromium()
    rng = np.random.default_rng(0)
    with ServerProcess(["--store", str(tmp_path / "log.db"), *ARGS], log_path=str(tmp_path / "server.log")) as srv:
        n = 60
        for i in range(n):
            k = int(rng.integers(2, 5))
            req = {"event_id": f"e{i}", "context": rng.normal(size=2).round(3).tolist(),
                   "actions": [{"id": f"item{j}", "features": np.eye(3)[j % 3].tolist()} for j in range(k)]}
            status, ans = srv.post("/rank", req)
            assert status == 200
            if i % 6 != 5:  # every sixth reward never comes: pending
                reward = float(ans["action_id"] == "item0") + 0.1 * float(rng.normal())
                assert srv.post("/reward", {"event_id": f"e{i}", "reward": reward})[0] == 200
            time.sleep(0.05)
        page = srv.url + "/"
        dom = _browser(exe, str(tmp_path / "profile"), "--dump-dom", page)
        assert dom.returncode == 0, dom.stderr[-2000:]
        html = dom.stdout
        assert '<b id="events">60</b>' in html and '<b id="pending">10</b>' in html
        assert '<b id="rewards">50</b>' in html
        assert html.count("<svg") == 2 and re.search(r'<polyline[^>]+points="[\d., ]+"', html)
        assert "uniform over the request's actions" in html and re.search(r"served policy</td><td[^>]*>-?\d", html)
        shot = tmp_path / "status.png"
        out = _browser(exe, str(tmp_path / "profile"), f"--screenshot={shot}", "--window-size=1200,820", page)
        assert out.returncode == 0 and shot.exists() and shot.stat().st_size > 20_000, out.stderr[-2000:]
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    keep = os.environ.get("BANDITKIT_SERVE_SCREENSHOT")
    if keep:
        shutil.copyfile(shot, keep)
