import sys

from jaxrank.cli import main

sys.exit(main())
