"""Stage 5: stray distro-archive ROCm packages — reported, or purged where nothing installed needs them."""
