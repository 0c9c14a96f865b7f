"""Bandit agents: a reward model, an online posterior over its weights, and a policy (``act`` / ``observe``)."""

from banditkit.agents.bandit import AgentState, BanditAgent, WarmupBuffer, selected_output

__all__ = ["BanditAgent", "AgentState", "WarmupBuffer", "selected_output"]
