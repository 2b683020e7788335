"""Debian packages as dpkg records them: the status database (dpkg), version order (debversion), which packages are
distro-archive ROCm (distro_rocm), and the stray-package report built from them (strays). Reads files; runs no dpkg.
"""
