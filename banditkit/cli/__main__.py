"""``python -m banditkit.cli ...``: the same as the ``banditkit`` console script."""

import sys

from banditkit.cli import main

if __name__ == "__main__":
    sys.exit(main())
