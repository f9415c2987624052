"""``python -m mnemon.server``: run a server in the foreground (``mnemon server start`` detaches it)."""

import sys

from mnemon.server.daemon import main

sys.exit(main())
