"""banditkit.policies (being written)."""
