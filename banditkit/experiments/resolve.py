"""What :func:`banditkit.run` runs: an env from a Gymnasium id (or as given), an agent from a spec (or as given), and
the name of its rows.  Public so that the command line and benchmarks make envs and agents exactly as ``run`` does."""

from __future__ import annotations

from typing import Any


def make_env(env: Any, *, steps: int | None = None, **env_kwargs):
    """The env :func:`banditkit.run` plays: ``gymnasium.make(env, **env_kwargs)`` for an id string (with
    ``max_steps=steps`` when the env takes it and ``env_kwargs`` do not set it, so the episode is long enough for
    ``steps`` rounds), or ``env`` itself for an env object (then ``env_kwargs`` must be empty).  An unknown id is a
    ``ValueError`` listing the banditkit ids."""
    if isinstance(env, str):
        import gymnasium

        import banditkit.environments  # noqa: F401  (registers the ids)

        try:
            if steps is not None and "max_steps" not in env_kwargs:
                try:  # an episode long enough for the requested rounds
                    return gymnasium.make(env, max_steps=steps, **env_kwargs)
                except TypeError:
                    pass
            return gymnasium.make(env, **env_kwargs)
        except gymnasium.error.Error as e:
            ids = sorted(k for k in gymnasium.registry if k.startswith("banditkit/"))
            raise ValueError(f"cannot make environment {env!r} ({e}); banditkit ids: {ids}") from e
    if env_kwargs:
        raise ValueError(f"env keyword arguments {sorted(env_kwargs)} need an env id string, not an env object")
    return env


def resolve_agent(agent: Any, env):
    """``agent`` as :func:`banditkit.run` plays it: a spec (text or :class:`~banditkit.agents.AgentSpec`) built by
    :func:`~banditkit.agents.make_agent` for ``env``; an agent object (``init`` / ``act`` / ``observe``) as it is."""
    from banditkit.agents.spec import AgentSpec

    if isinstance(agent, (str, AgentSpec)):
        from banditkit.agents import make_agent

        return make_agent(agent, env)
    if not (hasattr(agent, "init") and hasattr(agent, "act") and hasattr(agent, "observe")):
        raise TypeError(f"agent must be a BanditAgent or a spec string like 'hilofi-thompson', got {agent!r}")
    return agent


def agent_label(agent: Any, name: str | None = None) -> str:
    """The ``agent`` column of ``agent``'s rows: ``name`` when given, else its spec text (``agent.spec``, or the
    text of a spec), its ``name``, or its type's name."""
    if name is not None:
        return str(name)
    if isinstance(agent, str):
        return agent
    from banditkit.agents.spec import AgentSpec

    if isinstance(agent, AgentSpec):
        return agent.label
    return str(getattr(agent, "spec", None) or getattr(agent, "name", None) or type(agent).__name__)
