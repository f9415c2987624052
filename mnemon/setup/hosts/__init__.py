"""Plugin hosts of ``mnemon setup`` (OpenClaw, OpenCode, Pi): one module per host, named after the target
(``-`` → ``_``), each with ``plan_install(placement, options) -> Step`` and ``plan_eject(placement, options) -> Step`` (every
check first, the writes only in the returned step) and optionally ``installed(placement) -> bool``. ``Target.module`` in targets.py points here; a missing
module makes setup refuse that target with a clear error. stdlib only.
"""
