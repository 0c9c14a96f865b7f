"""A persistent XLA compilation cache for Bayesian optimisation, so that no process pays a compilation another has
already paid.

The first model-based trial of a fresh process compiles the surrogate's programs (the network's initialisation,
its update, the acquisition kernels): ~5–15 s on a 2-core machine.  JAX can keep compiled programs on disk
(``jax_compilation_cache_dir``); :func:`enable` turns that on in a per-user folder, so a second worker — or the
next run of the same script — loads them instead (measured in ``benchmarks/results/bo_compile_cache.md``).
:class:`~banditkit.bo.BayesOpt` calls it when it is created.

Rules, in order:

- ``BANDITKIT_COMPILE_CACHE=0`` (or ``off`` / ``false`` / ``no``) opts out: nothing is changed;
- a cache folder already configured — ``JAX_COMPILATION_CACHE_DIR`` or ``jax.config.update(
  "jax_compilation_cache_dir", ...)`` — is respected, as is ``jax_enable_compilation_cache = False``;
- else the folder is ``BANDITKIT_COMPILE_CACHE`` when it names a path, otherwise :func:`default_dir`
  (``$XDG_CACHE_HOME/banditkit/jax``, ``~/.cache/banditkit/jax``; ``~/Library/Caches/banditkit/jax`` on macOS,
  ``%LOCALAPPDATA%\\banditkit\\Cache\\jax`` on Windows), and programs that take at least
  :data:`MIN_COMPILE_SECONDS` to compile are kept — unless ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS`` or the
  config says otherwise (JAX's own default, 1 s, would keep none of BO's programs: each compiles in less).

The setting is process-wide: once enabled, every later JAX compilation of the process may be cached there.  An
entry is keyed by the program, the compiler flags, the JAX / jaxlib versions and the device, so a hit runs the very
program a compilation would have made.  The folder can be deleted at any time.
"""

from __future__ import annotations

import os
import sys

__all__ = ["MIN_COMPILE_SECONDS", "default_dir", "enable"]

#: programs that compile at least this fast are not written to the cache (a read costs about as much)
MIN_COMPILE_SECONDS = 0.0
_OFF = {"0", "off", "false", "no"}
_done: list[str | None] = []  # the outcome of the first call (the cache folder, or None)


def default_dir() -> str:
    """The per-user cache folder for banditkit's compiled programs (see the module docstring)."""
    home = os.path.expanduser("~")
    if sys.platform == "darwin":
        base = os.path.join(home, "Library", "Caches", "banditkit")
    elif os.name == "nt":
        base = os.path.join(os.environ.get("LOCALAPPDATA") or os.path.join(home, "AppData", "Local"), "banditkit",
                            "Cache")
    else:
        base = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache"), "banditkit")
    return os.path.join(base, "jax")


def enable() -> str | None:
    """Turn JAX's persistent compilation cache on as the module docstring says; returns the folder in use (the one
    configured before, or the one set here), or ``None`` when it is off (opted out, or disabled in JAX's config).
    Idempotent: only the first call of a process decides."""
    if _done:
        return _done[0]
    _done.append(_enable())
    return _done[0]


def _enable() -> str | None:
    import jax

    choice = os.environ.get("BANDITKIT_COMPILE_CACHE", "").strip()
    if choice.lower() in _OFF or not jax.config.jax_enable_compilation_cache:
        return None
    configured = jax.config.jax_compilation_cache_dir
    if configured:
        return configured
    path = os.path.abspath(os.path.expanduser(choice)) if choice and choice.lower() not in {"1", "on", "true", "yes"} \
        else default_dir()
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return None  # a read-only home: compile as before
    jax.config.update("jax_compilation_cache_dir", path)
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ \
            and jax.config.jax_persistent_cache_min_compile_time_secs == 1.0:  # JAX's default, not the user's
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    return path
