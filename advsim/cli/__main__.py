"""`python -m advsim.cli`: the command line."""

import sys

from advsim.cli import main

sys.exit(main())
