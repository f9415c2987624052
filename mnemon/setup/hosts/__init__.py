"""Plugin hosts of ``mnemon setup`` (OpenClaw, OpenCode, Pi): one module per host, named after the target
(``-`` → ``_``), each with ``install(placement, options) -> Report``, ``eject(placement, options) -> Report``
and optionally ``installed(placement) -> bool``. ``Target.module`` in targets.py points here; a missing
module makes setup refuse that target with a clear error. stdlib only.
"""
