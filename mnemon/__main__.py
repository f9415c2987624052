"""``python -m mnemon``: the same entry point as the ``mnemon`` console script."""

import sys

from mnemon.cli import main

sys.exit(main())
