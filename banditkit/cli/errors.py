"""The command line's error conventions: a user error is one line on stderr and a non-zero exit status.

- :class:`CLIError`: bad input found by a command (exit status 2);
- :class:`Parser`: ``argparse`` whose own errors (unknown option, bad value) are a :class:`CLIError` too, instead of
  a usage dump.
"""

from __future__ import annotations

import argparse


class CLIError(Exception):
    """A user error reported as one line."""


class Parser(argparse.ArgumentParser):
    """``argparse`` whose errors are one line (no usage dump) and exit with status 2."""

    def error(self, message: str):  # noqa: D401 - argparse API
        raise CLIError(f"{self.prog}: error: {message} (see {self.prog} --help)")
