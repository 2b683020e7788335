"""The linkage analyser: a static, loader-exact model of glibc's ld.so (reads files, executes nothing).

elf (one ELF file's header and dynamic section) → fsview (the analysed system's files, this machine's or an image's)
→ ldcache, platform (/etc/ld.so.cache, the CPU's hwcaps) → loader (the search rules) → process (the entry points:
`resolve`, `resolve_process`, `Analyser`) → image (what comes out: a ProcessImage) → lddview (ldd's lines).
Imports nothing from the rest of verify/.
"""
