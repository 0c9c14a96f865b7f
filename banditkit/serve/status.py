"""The status page (``GET /``) and its numbers (``GET /status.json``): traffic, rewards, and policy values.

:func:`summarize` reads the store:

* counts: decisions, rewards (observed / default at the deadline), pending (decided, no reward yet); decisions/s over
  the last minute; the micro-batches' mean size;
* per time bucket (``WINDOW`` seconds back from now, ``BUCKETS`` buckets): decisions/s, observed rewards/s and the
  mean observed reward;
* policy values on the latest ``VALUE_ROWS`` events with an observed reward, by inverse propensity scoring with
  95 % normal intervals (:func:`banditkit.offline.estimators.ips`; ``w_i = π(a_i | x_i) / p_i`` with ``p_i`` the logged
  propensity): the **served** policy (its own logged probabilities: ``w = 1``, the plain mean reward), **uniform**
  over each request's actions, and the **baseline** (each request's ``baseline_id``, else its first action; in
  apprentice mode that is the served policy).  In apprentice mode the log is deterministic (``p = 1``), so only the
  served baseline's value is estimable; the page gives the agent's agreement with it instead (the mean of the
  agent's probability of the baseline's action).

:func:`render` draws the page: plain HTML with inline SVG charts (no script, no external file), refreshed every 10 s.
"""

from __future__ import annotations

import html
import json
import time

import numpy as np

from banditkit.offline.estimators import ips

WINDOW = 600.0  # seconds of history in the charts
BUCKETS = 60
VALUE_ROWS = 5000


def _values(engine, rows: list[tuple]) -> dict:
    if not rows:
        return {}
    k = engine.cfg.max_actions
    n = len(rows)
    served, uniform, base = np.zeros((n, k)), np.zeros((n, k)), np.zeros((n, k))
    acts = np.zeros(n, np.int64)
    prop = np.zeros(n)
    rew = np.zeros(n)
    agree = []
    for i, (actions, chosen, p, probs, baseline, response, reward) in enumerate(rows):
        ids = [a["id"] for a in json.loads(actions)]
        m = len(ids)
        served[i, :m] = json.loads(probs) if probs else np.eye(m)[chosen]
        uniform[i, :m] = 1.0 / m
        resp = json.loads(response)
        b = ids.index(baseline) if baseline in ids else 0
        base[i, b] = 1.0
        if "apprentice" in resp:
            agree.append(resp["apprentice"]["agent_probabilities"][chosen])
        acts[i], prop[i], rew[i] = chosen, p, reward
    out = {"rows": n}
    targets = {"served": served, "uniform": uniform}
    if not engine.cfg.apprentice:
        targets["baseline"] = base
    for name, t in targets.items():
        e = ips(t, acts, rew, prop)
        out[name] = {"value": e.value, "lower": e.lower, "upper": e.upper}
    if agree:
        out["agent_agreement"] = float(np.mean(agree))
    return out


def summarize(engine, ranker=None) -> dict:
    """The numbers of the status page (see the module docstring)."""
    store = engine.status_store
    now = time.time()
    since = max(engine.started, now - WINDOW)
    width = max((now - since) / BUCKETS, 1.0)
    s = store.series(since, width)
    nb = int(np.ceil((now - since) / width))
    dec = np.zeros(nb)
    obs = np.zeros(nb)
    mean = np.full(nb, np.nan)
    for b, c in s["decisions"]:
        if 0 <= b < nb:
            dec[b] = c / width
    for b, c, m in s["rewards"]:
        if 0 <= b < nb:
            obs[b], mean[b] = c / width, m
    last_min = store.db.execute("SELECT COUNT(*) FROM events WHERE ts >= ?", (now - 60.0,)).fetchone()[0]
    span = min(60.0, max(now - engine.started, 1e-9))
    out = {"spec": engine.cfg.spec, "apprentice": engine.cfg.apprentice, "model_version": engine.model_version,
           "uptime_s": now - engine.started, "counts": store.counts(), "decisions_per_s": last_min / span,
           "series": {"t0": since, "width_s": width, "decisions_per_s": dec.tolist(), "rewards_per_s": obs.tolist(),
                      "mean_reward": [None if np.isnan(v) else float(v) for v in mean]},
           "values": _values(engine, store.rewarded(VALUE_ROWS))}
    if ranker is not None:
        out["batches"], out["batched"] = ranker.batches, ranker.items
        if ranker.batches:
            out["mean_batch"] = ranker.items / ranker.batches
    return out


def _chart(title: str, lines: list[tuple[str, str, list]], width: float, unit: str, w: int = 560, h: int = 170) -> str:
    """An inline SVG line chart of ``lines`` (``(label, colour, ys)``; ``None`` = no point) against bucket time."""
    pad_l, pad_r, pad_t, pad_b = 52, 10, 24, 26
    ys = [v for _, _, vs in lines for v in vs if v is not None]
    lo, hi = (min(ys + [0.0]), max(ys + [1e-9])) if ys else (0.0, 1.0)
    if hi - lo < 1e-9:
        hi = lo + 1.0
    n = max((len(vs) for _, _, vs in lines), default=1)
    fx = lambda i: pad_l + (w - pad_l - pad_r) * (i / max(n - 1, 1))
    fy = lambda v: pad_t + (h - pad_t - pad_b) * (1 - (v - lo) / (hi - lo))
    parts = [f'<svg class="chart" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" '
             f'aria-label="{html.escape(title)}">',
             f'<text x="{pad_l}" y="15" font-size="13" font-weight="bold">{html.escape(title)}</text>',
             f'<line x1="{pad_l}" y1="{h - pad_b}" x2="{w - pad_r}" y2="{h - pad_b}" stroke="#888"/>',
             f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{h - pad_b}" stroke="#888"/>']
    for v in (lo, (lo + hi) / 2, hi):
        parts.append(f'<text x="{pad_l - 4}" y="{fy(v) + 4:.1f}" font-size="10" text-anchor="end">{v:.3g}</text>')
    parts.append(f'<text x="{pad_l}" y="{h - 8}" font-size="10">-{n * width:.0f} s</text>'
                 f'<text x="{w - pad_r}" y="{h - 8}" font-size="10" text-anchor="end">now ({unit}, '
                 f'{width:.0f} s buckets)</text>')
    for j, (label, colour, vs) in enumerate(lines):
        seg, segs = [], []
        for i, v in enumerate(vs):
            if v is None:
                if seg:
                    segs.append(seg)
                seg = []
            else:
                seg.append(f"{fx(i):.1f},{fy(v):.1f}")
        if seg:
            segs.append(seg)
        for sg in segs:
            if len(sg) == 1:
                x, y = sg[0].split(",")
                parts.append(f'<circle cx="{x}" cy="{y}" r="2" fill="{colour}"/>')
            else:
                parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.8" points="{" ".join(sg)}"/>')
        parts.append(f'<text x="{w - pad_r - 150 + 80 * (j % 2)}" y="15" font-size="11" fill="{colour}">'
                     f'{html.escape(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _fmt_value(v: dict | None) -> str:
    if not v:
        return "—"
    return f"{v['value']:.3f} <small>[{v['lower']:.3f}, {v['upper']:.3f}]</small>"


def render(s: dict) -> str:
    """The status page's HTML for :func:`summarize`'s numbers."""
    c = s["counts"]
    ser = s["series"]
    vals = s["values"]
    rows = [("served policy" + (" (the baseline, apprentice mode)" if s["apprentice"] else ""), vals.get("served")),
            ("uniform over the request's actions", vals.get("uniform"))]
    if not s["apprentice"]:
        rows.append(("baseline (baseline_id, else the first action)", vals.get("baseline")))
    table = "".join(f"<tr><td>{html.escape(n)}</td><td class='num'>{_fmt_value(v)}</td></tr>" for n, v in rows)
    agree = (f"<p>Agent ↔ baseline agreement: <b id='agreement'>{vals['agent_agreement']:.1%}</b> (the agent's mean "
             "probability of the baseline's action)</p>") if "agent_agreement" in vals else ""
    charts = (_chart("Traffic", [("decisions/s", "#1f77b4", ser["decisions_per_s"]),
                                 ("rewards/s", "#ff7f0e", ser["rewards_per_s"])], ser["width_s"], "per second")
              + _chart("Mean observed reward", [("reward", "#2ca02c", ser["mean_reward"])], ser["width_s"], "reward"))
    batch = f"{s['mean_batch']:.1f}" if "mean_batch" in s else "—"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="10">
<title>banditkit serve — {html.escape(s['spec'])}</title>
<style>body{{font-family:sans-serif;margin:20px;color:#222;max-width:1180px}} .tiles{{display:flex;gap:12px;
flex-wrap:wrap}} .tile{{border:1px solid #ccc;border-radius:6px;padding:8px 14px;min-width:120px}}
.tile b{{font-size:22px;display:block}} table{{border-collapse:collapse;margin-top:8px}} td,th{{border-bottom:1px
solid #ddd;padding:4px 10px;text-align:left}} .num{{text-align:right;font-variant-numeric:tabular-nums}}
.charts{{display:flex;gap:16px;flex-wrap:wrap;margin-top:14px}}</style></head>
<body><h1>banditkit serve</h1>
<p>Agent <code>{html.escape(s['spec'])}</code>{' in <b>apprentice mode</b>' if s['apprentice'] else ''} · model
version {s['model_version']} · up {s['uptime_s']:.0f} s</p>
<div class="tiles">
<div class="tile">decisions/s<b id="rate">{s['decisions_per_s']:.1f}</b></div>
<div class="tile">decisions<b id="events">{c['events']}</b></div>
<div class="tile">rewards<b id="rewards">{c['observed']}</b>+ {c['defaulted']} default</div>
<div class="tile">pending rewards<b id="pending">{c['pending']}</b></div>
<div class="tile">mean batch<b>{batch}</b></div></div>
<div class="charts">{charts}</div>
<h2>Estimated value per decision</h2>
<p>Inverse propensity scoring on the latest {vals.get('rows', 0)} decisions with an observed reward, 95 % intervals.</p>
<table id="values"><tr><th>policy</th><th>value [95 % interval]</th></tr>{table}</table>{agree}
</body></html>"""
