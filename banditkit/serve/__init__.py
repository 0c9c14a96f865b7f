"""``banditkit serve``: a decision service (rank / reward over HTTP) with a durable SQLite event log.

* :mod:`~banditkit.serve.schema` — the store's tables (``SCHEMA``, ``SCHEMA_VERSION``).
"""

from banditkit.serve.schema import SCHEMA, SCHEMA_VERSION

__all__ = ["SCHEMA", "SCHEMA_VERSION"]
