"""``banditkit serve``: the decision service (:mod:`banditkit.serve`) on ``--host:--port``, logging to ``--store``.

::

    banditkit serve --agent hilofi-thompson --store decisions.db --context-dim 16 --action-dim 32 --max-actions 20

The store's settings (agent, shapes, seed, draws) are fixed when it is made; restarting on the same store may omit
them (they are read back) and must not contradict them.  The bearer token comes from ``--token-file`` or the
environment variable ``BANDITKIT_SERVE_TOKEN`` (never the command line, which other users of the machine can read).
SIGTERM / Ctrl-C stop it cleanly (the learner applies what is committed and saves a snapshot); ``kill -9`` loses
nothing acknowledged: the next start loads the last snapshot and replays the log after it.
"""

from __future__ import annotations

import argparse
import os
import sys

from banditkit.cli.errors import CLIError

TOKEN_ENV = "BANDITKIT_SERVE_TOKEN"
_FIXED = {"context_dim": ("context_dim", int), "action_dim": ("action_dim", int), "max_actions": ("num_actions", int),
          "seed": ("seed", int), "draws": ("draws", int), "agent": ("spec", str)}
_DEFAULTS = dict(agent=None, context_dim=1, action_dim=0, max_actions=20, seed=0, draws=32)


def register(sub) -> None:
    """Add the ``serve`` sub-command."""
    p = sub.add_parser("serve", help="serve an agent over HTTP (rank / reward) with a durable SQLite log",
                       description=__doc__.split("::")[0].strip(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agent", metavar="SPEC", help="agent spec, e.g. hilofi-thompson (required for a new store)")
    p.add_argument("--store", metavar="PATH", required=True, help="SQLite file of the event log (created if new)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--context-dim", type=int, help="numbers in a request's context (default 1)")
    p.add_argument("--action-dim", type=int,
                   help="features per action (default 0: a fixed catalogue of action ids, no features)")
    p.add_argument("--max-actions", type=int, help="most actions per request (catalogue: most ids; default 20)")
    p.add_argument("--draws", type=int,
                   help="Thompson draws per micro-batch; each decision plays one of them at random, so propensities "
                        "are multiples of 1/draws (default 32)")
    p.add_argument("--seed", type=int, help="decision keys' seed (default 0)")
    p.add_argument("--apprentice", action="store_true",
                   help="serve the request's baseline_id (else its first action) while the agent learns from it")
    p.add_argument("--reward-deadline", type=float, metavar="SECONDS",
                   help="give events without a reward after this long the --default-reward (default: wait forever)")
    p.add_argument("--default-reward", type=float, default=0.0)
    p.add_argument("--snapshot-every", type=int, default=1000, metavar="N", help="save the agent every N rewards")
    p.add_argument("--max-batch", type=int, default=64, help="most /rank (or /reward) requests per micro-batch")
    p.add_argument("--learn-batch", type=int, default=64, help="most rewards per learner step")
    p.add_argument("--sync", choices=("full", "normal"), default="full",
                   help="full: every commit reaches the disk (survives power loss); normal: survives the process "
                        "being killed, not the machine")
    p.add_argument("--max-body", type=int, default=1 << 20, help="largest request body in bytes (default 1 MiB)")
    p.add_argument("--token-file", help=f"file holding the bearer token (or set {TOKEN_ENV})")
    p.add_argument("--log-level", default="warning", choices=("critical", "error", "warning", "info", "debug"))
    p.set_defaults(func=cmd_serve)


def _token(args) -> str | None:
    if args.token_file:
        try:
            with open(args.token_file, encoding="utf-8") as fh:
                token = fh.read().strip()
        except OSError as e:
            raise CLIError(f"cannot read --token-file: {e}") from None
        if not token:
            raise CLIError(f"--token-file {args.token_file!r} is empty")
        return token
    return os.environ.get(TOKEN_ENV) or None


def config_from_args(args):
    """The :class:`~banditkit.serve.engine.ServeConfig` of the command line, completed from an existing store."""
    from banditkit.serve.engine import ServeConfig
    from banditkit.serve.store import SQLiteStore

    saved: dict[str, str] = {}
    if os.path.exists(args.store):
        s = SQLiteStore(args.store, sync=args.sync)
        saved = s.meta()
        s.close()
    values = {}
    for opt, (key, kind) in _FIXED.items():
        given = getattr(args, opt)
        values[opt] = given if given is not None else (kind(saved[key]) if key in saved else _DEFAULTS[opt])
    if values["agent"] is None:
        raise CLIError("--agent is required for a new store (e.g. --agent hilofi-thompson)")
    return ServeConfig(spec=values["agent"], context_dim=values["context_dim"], action_dim=values["action_dim"],
                       max_actions=values["max_actions"], draws=values["draws"], seed=values["seed"],
                       apprentice=bool(args.apprentice), snapshot_every=args.snapshot_every,
                       reward_deadline=args.reward_deadline, default_reward=args.default_reward,
                       max_batch=args.max_batch, learn_batch=args.learn_batch, sync=args.sync)


def cmd_serve(args) -> int:
    try:
        import uvicorn
    except ImportError:
        raise CLIError("banditkit serve needs its extra: pip install 'banditkit[serve]'") from None
    from banditkit.serve.app import ServeApp
    from banditkit.serve.engine import Engine

    token = _token(args)
    cfg = config_from_args(args)
    engine = Engine(args.store, cfg)
    compiled = engine.warm_up()
    app = ServeApp(engine, token=token, max_body=args.max_body)
    print(f"banditkit serve: {cfg.spec} on http://{args.host}:{args.port} (store {args.store}; model version "
          f"{engine.model_version}, {engine.replayed} rewards replayed on start, "
          f"compiled in {compiled:.1f} s"
          f"{'; bearer token required' if token else ''})", file=sys.stderr, flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, access_log=False,
                timeout_graceful_shutdown=10)
    return 0
