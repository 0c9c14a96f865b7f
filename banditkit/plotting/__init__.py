"""banditkit.plotting (being written)."""
