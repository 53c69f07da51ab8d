"""``python -m jaxrank``: the command-line interface."""

import sys

from jaxrank.cli import main

if __name__ == "__main__":
    sys.exit(main())
