"""Stage 1, preflight: is this host fit to be provisioned? Checked before anything changes; a host that is not stops
with one line saying what is wrong and what to do, and the other hosts go on."""
