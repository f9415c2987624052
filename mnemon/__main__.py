"""``python -m mnemon``: the same entry point as the ``mnemon`` console script (``mnemon.client``)."""

from mnemon.client import main

main()
