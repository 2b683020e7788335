"""Build tiny real ELF files with gcc for loader tests, and ask the real loader about them.

    b = ElfBuilder(tmp_path)
    b.lib("d1/libA.so", soname="libA.so", needed=["libB.so"], runpath="$ORIGIN/../d2")
    b.lib("d2/libB.so", soname="libB.so")
    b.lib("d3/lib32.so", m32=True)                      # ELFCLASS32 i386 (gcc -m32 -nostdlib; no 32-bit libc needed)
    b.exe("bin/prog", needed=["libA.so"], rpath="/x")   # a program; dlopen_program() one that dlopens its arguments

NEEDED entries are made the way the linker makes them: each needed name gets a stub library whose DT_SONAME is that
exact string (which may contain '/' or '$ORIGIN'), and the stub is linked in by path, so the name does not have to
exist anywhere yet. `--no-as-needed` keeps every entry (Debian's gcc would otherwise drop unused ones).

Oracles: `real_ldd` (glibc's ldd, load addresses and the vDSO dropped) and `loaded_by_program` (a real process that
dlopen()s names in order and lists, via dl_iterate_phdr, every object in the loader's own list order).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from verify.ld.lddview import parse_ldd_output

GCC = "gcc"

DLOPEN_PROGRAM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

static int show(struct dl_phdr_info *info, size_t size, void *data) {
    (void) size; (void) data;
    printf("OBJECT %s\n", info->dlpi_name);
    return 0;
}

void *open_from_library(const char *name);

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *name = argv[i];
        void *handle;
        if (strncmp(name, "lib:", 4) == 0)
            handle = open_from_library(name + 4);   /* dlopen called from code in libcaller.so */
        else
            handle = dlopen(name, RTLD_LAZY);
        if (!handle)
            printf("ERROR %s\n", dlerror());
    }
    dl_iterate_phdr(show, NULL);
    return 0;
}
"""

CALLER_LIBRARY = r"""
#include <dlfcn.h>
void *open_from_library(const char *name) { return dlopen(name, RTLD_LAZY); }
"""

NO_CALLER = r"""
#include <stddef.h>
void *open_from_library(const char *name) { (void) name; return NULL; }
"""


class ElfBuilder:
    def __init__(self, top: Path):
        self.top = Path(top)
        self.stubs = self.top / ".stubs"

    def path(self, relative: str) -> Path:
        return self.top / relative

    def _stub(self, name: str) -> Path:
        """A library whose DT_SONAME is `name`: linking it in adds DT_NEEDED `name`."""
        digest = hashlib.sha1(name.encode()).hexdigest()[:16]
        stub = self.stubs / f"stub-{digest}.so"
        if not stub.exists():
            self.stubs.mkdir(parents=True, exist_ok=True)
            _gcc(
                ["-shared", "-fPIC", "-nostdlib", "-o", str(stub), "-x", "c", "-", f"-Wl,-soname,{name}"],
                "int stub_symbol;\n",
            )
        return stub

    def _link_flags(self, needed, rpath, runpath, nodeflib, soname) -> list[str]:
        flags = ["-Wl,--no-as-needed"]
        if soname:
            flags.append(f"-Wl,-soname,{soname}")
        if rpath is not None:
            flags += ["-Wl,--disable-new-dtags", f"-Wl,-rpath,{rpath}"]
        if runpath is not None:
            flags += ["-Wl,--enable-new-dtags", f"-Wl,-rpath,{runpath}"]
        if nodeflib:
            flags.append("-Wl,-z,nodefaultlib")
        flags += [str(self._stub(name)) for name in needed]
        return flags

    def lib(
        self,
        relative: str,
        *,
        soname: str | None = None,
        needed=(),
        rpath: str | None = None,
        runpath: str | None = None,
        nodeflib: bool = False,
        m32: bool = False,
        libc: bool = True,
    ) -> Path:
        out = self.path(relative)
        out.parent.mkdir(parents=True, exist_ok=True)
        if m32:
            _gcc(
                ["-m32", "-shared", "-fPIC", "-nostdlib", "-o", str(out), "-x", "c", "-"]
                + ([f"-Wl,-soname,{soname}"] if soname else []),
                "int lib32_symbol;\n",
            )
            return out
        source = f"int symbol_{hashlib.sha1(relative.encode()).hexdigest()[:8]}(void) {{ return 1; }}\n"
        argv = ["-shared", "-fPIC", "-o", str(out), "-x", "c", "-", "-x", "none"]
        argv += self._link_flags(needed, rpath, runpath, nodeflib, soname)
        if not libc:
            argv.insert(0, "-nostdlib")
        _gcc(argv, source)
        return out

    def exe(
        self,
        relative: str,
        *,
        needed=(),
        rpath: str | None = None,
        runpath: str | None = None,
        source: str = "int main(void) { return 0; }\n",
        extra=(),
    ) -> Path:
        out = self.path(relative)
        out.parent.mkdir(parents=True, exist_ok=True)
        argv = ["-o", str(out), "-x", "c", "-", "-x", "none", *extra]
        argv += self._link_flags(needed, rpath, runpath, False, None)
        _gcc(argv, source)
        return out

    def dlopen_program(
        self, relative: str, *, caller_library: str | None = None, rpath: str | None = None, runpath: str | None = None
    ) -> Path:
        """A program that dlopen()s its arguments in order ("lib:NAME": from code in `caller_library`) and prints
        the loader's object list. `caller_library` (a path relative to the top) is built and linked in if given."""
        extra = ["-ldl"]
        if caller_library:
            caller = self.path(caller_library)
            caller.parent.mkdir(parents=True, exist_ok=True)
            _gcc(
                ["-shared", "-fPIC", "-o", str(caller), "-x", "c", "-", "-ldl", f"-Wl,-soname,{caller.name}"]
                + (["-Wl,--disable-new-dtags", f"-Wl,-rpath,{rpath}"] if rpath else [])
                + (["-Wl,--enable-new-dtags", f"-Wl,-rpath,{runpath}"] if runpath else []),
                CALLER_LIBRARY,
            )
            # RUNPATH, not RPATH: an executable's RPATH would apply to every lookup in the process.
            extra = [str(caller), "-Wl,--enable-new-dtags", f"-Wl,-rpath,{caller.parent}", "-ldl"]
            return self.exe(relative, source=DLOPEN_PROGRAM, extra=extra)
        return self.exe(relative, source=DLOPEN_PROGRAM + NO_CALLER, extra=extra)


def _gcc(argv: list[str], source: str) -> None:
    result = subprocess.run([GCC, *argv], input=source, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"gcc {' '.join(argv)} failed:\n{result.stderr}")


def gcc_m32_available() -> bool:
    try:
        _gcc(["-m32", "-shared", "-nostdlib", "-o", os.devnull, "-x", "c", "-"], "int x;\n")
    except (RuntimeError, OSError):
        return False
    return True


def real_ldd(path, *, env: dict | None = None, cwd=None) -> tuple[list[str], subprocess.CompletedProcess]:
    """glibc's ldd on `path`: its lines without addresses or the vDSO, and the raw result (for error messages)."""
    full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **(env or {})}
    result = subprocess.run(["ldd", str(path)], capture_output=True, text=True, env=full_env, cwd=cwd)
    return parse_ldd_output(result.stdout), result


def loaded_by_program(program, names, *, env: dict | None = None, cwd=None) -> tuple[list[str], list[str], str]:
    """Run a dlopen_program: (object names in the loader's list order, without main and vDSO; dlopen errors; stderr)."""
    full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **(env or {})}
    result = subprocess.run([str(program), *names], capture_output=True, text=True, env=full_env, cwd=cwd)
    objects, errors = [], []
    for line in result.stdout.splitlines():
        if line.startswith("OBJECT "):
            name = line[len("OBJECT ") :]
            if name and not name.startswith("linux-vdso"):
                objects.append(name)
        elif line.startswith("ERROR "):
            errors.append(line[len("ERROR ") :])
    return objects, errors, result.stderr
