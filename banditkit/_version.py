"""The package version, importable without importing the package (checkpoint files record it)."""

__version__ = "0.2.0"
