"""The checks of `verify check`, one module per check id (linkage, versions, runtime, maps, nf4), and the registry
that runs them in order into one report (registry)."""
