"""What :func:`banditkit.run` runs: an env from a Gymnasium id (or as given), an agent from a spec string (or as
given), and the name of its rows."""

from __future__ import annotations


def _make_env(env, env_kwargs: dict, steps: int | None = None):
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



def _make_agent(agent, env):
    if isinstance(agent, str):
        from banditkit.agents import make_agent

        return make_agent(agent, env)
    if not (hasattr(agent, "init") and hasattr(agent, "act") and hasattr(agent, "observe")):
        raise TypeError(f"agent must be a BanditAgent or a spec string like 'hilofi-thompson', got {agent!r}")
    return agent



def _agent_name(agent, name):
    if name is not None:
        return str(name)
    return str(getattr(agent, "spec", None) or getattr(agent, "name", None) or type(agent).__name__)
