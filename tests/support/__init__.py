"""Helpers shared by the tests: building real venvs, real ELF files, real Debian hosts."""
