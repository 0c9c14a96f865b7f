"""banditkit.experiments (being written)."""
