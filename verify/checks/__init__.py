"""The checks of `verify check`, one module per check id (linkage, versions, runtime, maps, nf4 …), and `host.py`, the
host as every check sees it; verify/commands/check.py runs them in order into one report."""
