"""``python -m crawldedup``: the same command as the ``crawldedup`` console script."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
