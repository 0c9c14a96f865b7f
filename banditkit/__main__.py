"""``python -m banditkit ...``: the same as the ``banditkit`` console script (:mod:`banditkit.cli`)."""

import sys

from banditkit.cli import main

if __name__ == "__main__":
    sys.exit(main())
