"""banditkit.bo (being written)."""
