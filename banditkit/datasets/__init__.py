"""banditkit.datasets (being written)."""
