"""banditkit.agents (being written)."""
