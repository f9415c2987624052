"""``python -m mnemon.server``: run a server in the foreground (``mnemon server start`` detaches it)."""

import os
import sys

from mnemon.server.daemon import main

code = main()
sys.stderr.flush()
os._exit(code)  # skip the interpreter's teardown of everything preloaded: nothing is left to flush
