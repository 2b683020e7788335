"""The linkage analysis' public entry points: which file the loader maps for every library a process needs, and why.

    resolve(path)                                   -> ProcessImage   # the `ldd path` view
    resolve_process(exe, dlopens=[...], env={...})  -> ProcessImage   # a process that starts `exe`, then dlopen()s

An `Analyser` holds the caches (parsed ELF files by inode, directory listings, the parsed ld.so.cache, the resolver's
answers in a RunMemo) so that many analyses of one system in one run stay fast; the two functions above make a fresh
one each time. Nothing is executed: files are only read (see verify/ld/loader.py for the rules and what is not
modelled).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from verify.ld import image as m
from verify.ld.elf import ElfError
from verify.ld.fsview import FileSystemView
from verify.ld.image import ProcessImage
from verify.ld.ldcache import LdCache, LdCacheError, read_ld_cache, read_ld_so_conf
from verify.ld.loader import Loader, RunMemo
from verify.ld.platform import LoaderPlatform, detect_platform

LD_SO_CACHE = "/etc/ld.so.cache"
LD_SO_CONF = "/etc/ld.so.conf"


@dataclass(frozen=True)
class Dlopen:
    """One dlopen() call: `name` as passed (a path, or a bare name searched with the caller's paths) and the object
    whose code calls dlopen (None: the executable). Python's extension imports pass full paths; ctypes.CDLL("libx.so")
    passes a bare name from _ctypes' own module."""

    name: str
    caller: str | None = None


class Analyser:
    def __init__(
        self,
        root: str = "/",
        *,
        platform: LoaderPlatform | None = None,
        cache_path: str = LD_SO_CACHE,
        cwd: str | None = None,
        fs: FileSystemView | None = None,
    ):
        # `fs`: the caller's view of the same root (`verify check` makes one per run; its caches are shared then).
        self.fs = fs if fs is not None else FileSystemView(root, cwd)
        self.memo = RunMemo()  # shared by the analyses of this Analyser: see RunMemo
        self.root = root
        self.platform = platform or detect_platform(root, fs=self.fs)
        self.setup_findings: list[m.Finding] = []
        self.cache: LdCache | None = None
        self.conf_dirs: tuple[str, ...] | None = None
        host_cache = self.fs.host_path(cache_path)
        try:
            self.cache = read_ld_cache(host_cache, cache_path, follow=self.fs.is_host) if host_cache else None
        except LdCacheError as error:
            # glibc ignores a cache it cannot use and searches the system directories.
            self.setup_findings.append(m.Finding(cache_path, str(error)))
        if self.cache is None and not self.setup_findings:
            # No cache at all (an image where ldconfig never ran): what is found through these directories is labelled
            # "ld.so.conf", since glibc itself would only search the system directories.
            self.conf_dirs = read_ld_so_conf(LD_SO_CONF, lambda p: self.fs.host_path(p) or p) or None

    def _loader(self, library_path: str | None) -> Loader:
        return Loader(
            self.platform, self.fs, self.cache, conf_dirs=self.conf_dirs, library_path=library_path, memo=self.memo
        )

    def _start(self, loader: Loader, path: str, *, executed: bool) -> None:
        st = self.fs.stat(path)  # also the file identity loader.start needs: one stat per analysis, not two
        info = self.fs.elf(path, st)  # (st None: ElfError "no such file")
        if info.elf_class != self.platform.elf_class or info.machine != self.platform.machine:
            raise ElfError(
                path,
                f"{info.elf_class}-bit {info.machine_name} file: this analyser models the "
                f"{self.platform.elf_class}-bit x86-64 loader only",
            )
        loader.start(path, info=info, executed=executed, st=st)

    def resolve(self, path: str, *, library_path: str | None = None) -> ProcessImage:
        """What `ldd path` reports: `path` loaded by ld.so as the main program, then its dependencies.

        Raises ElfError when `path` itself cannot be analysed (not ELF, truncated, unreadable, a directory)."""
        loader = self._loader(library_path)
        self._start(loader, path, executed=False)
        return self._image(path, loader)

    def resolve_process(
        self, executable: str, dlopens: Iterable[str | Dlopen] = (), *, library_path: str | None = None
    ) -> ProcessImage:
        """A process started from `executable` that then dlopen()s each entry of `dlopens`, in order.

        Raises ElfError when the executable cannot be analysed; problems with dlopen'ed files are findings."""
        loader = self._loader(library_path)
        self._start(loader, executable, executed=True)
        for entry in dlopens:
            call = entry if isinstance(entry, Dlopen) else Dlopen(str(entry))
            caller = None
            if call.caller is not None:
                caller = loader.object_for_path(call.caller)
                if caller is None:
                    loader.findings.append(
                        m.Finding(
                            call.caller,
                            f"{call.caller}: dlopen caller is not loaded in the "
                            f"process; {call.name} searched as if from the executable",
                        )
                    )
            loader.dlopen(call.name, caller)
        return self._image(executable, loader)

    def _image(self, executable: str, loader: Loader) -> ProcessImage:
        return ProcessImage(
            executable=executable,
            objects=tuple(obj.public() for obj in loader.objects),
            requests=tuple(loader.requests),
            findings=tuple(self.setup_findings) + tuple(loader.findings),
            root=self.root,
            platform=self.platform.summary(),
        )


def resolve(
    path: str, *, root: str = "/", library_path: str | None = None, platform: LoaderPlatform | None = None
) -> ProcessImage:
    return Analyser(root, platform=platform).resolve(path, library_path=library_path)


def resolve_process(
    executable: str,
    dlopens: Iterable[str | Dlopen] = (),
    *,
    env: Mapping[str, str] | None = None,
    root: str = "/",
    platform: LoaderPlatform | None = None,
    library_path: str | None = None,
) -> ProcessImage:
    """`env` is the process environment the loader reads (only LD_LIBRARY_PATH matters here; default: none);
    `library_path`, when given, is LD_LIBRARY_PATH itself and wins over `env`."""
    if library_path is None:
        library_path = (env or {}).get("LD_LIBRARY_PATH")
    return Analyser(root, platform=platform).resolve_process(executable, dlopens, library_path=library_path)
