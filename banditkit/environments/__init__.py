"""banditkit.environments (being written)."""
