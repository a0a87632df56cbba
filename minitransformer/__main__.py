"""``python -m minitransformer``: the command line (see :mod:`minitransformer.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
