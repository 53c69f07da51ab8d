"""Command-line interface (public module): ``jaxrank train|predict|evaluate|sweep|demo``.

The program is :func:`main` (the ``jaxrank`` console script and ``python -m
jaxrank``); :func:`build_parser` returns its ``argparse`` parser. The commands
follow the conventions of ``svm_perf_learn`` / ``svm_map_learn``; see
``jaxrank --help``.
"""

from jaxrank._src.cli.main import build_parser, main

__all__ = ["build_parser", "main"]

if __name__ == "__main__":
    import sys

    sys.exit(main())
