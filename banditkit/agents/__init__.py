"""Bandit agents: a reward model, an online posterior over its weights, and a policy (``act`` / ``observe``).

``BanditAgent(model, posterior, policy)`` builds one by hand; ``make_agent("hilofi-thompson", env)`` resolves a spec
string with the environment's default reward model.
"""

from banditkit.agents.bandit import AgentShapes, AgentState, BanditAgent, WarmupBuffer, selected_output
from banditkit.agents.factory import DEFAULT_HYPER, default_model, make_agent, parse_spec
from banditkit.agents.spec import AgentSpec

__all__ = [
    "BanditAgent",
    "AgentState",
    "AgentShapes",
    "WarmupBuffer",
    "selected_output",
    "make_agent",
    "AgentSpec",
    "parse_spec",
    "default_model",
    "DEFAULT_HYPER",
]
