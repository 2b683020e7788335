"""The shared objects `import torch` opens itself, in order — read from the installed torch, nothing imported.

From torch/__init__.py (2.13; the same file in the CPU, CUDA and ROCm wheels), on Linux:
1. `torch/_rocm_init.py`, if present (torch built against ROCm *runtime wheels*, TheRock), preloads libraries from
   the rocm-sdk packages first; the download.pytorch.org rocm7.2 wheel does not have it, and this model does not
   follow it (it is reported, so a host that has it is not silently mis-modelled);
2. `_load_global_deps()`: `ctypes.CDLL(torch/lib/libtorch_global_deps.so, RTLD_GLOBAL)` when
   `torch._utils_internal.USE_GLOBAL_DEPS` (True in the wheels); its NEEDED pull torch's bundled runtime in;
3. `from torch._C import *`: the extension `torch/_C.cpython-<tag>.so`, whose NEEDED chain is libtorch_python →
   libtorch → libtorch_cpu / libtorch_hip → the ROCm libraries bundled in torch/lib.
Checked with `LD_DEBUG=files python -c "import torch, bitsandbytes"` in the torch 2.13.0 venv: exactly these two
are dlopen'ed by torch (then numpy's extension modules, which bring no ROCm library and are not modelled, then
bitsandbytes' ctypes load of its native library).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from verify.safe_read import read_text
from verify.stack.venv_layout import MAX_SOURCE


@dataclass(frozen=True)
class TorchLoads:
    dlopens: tuple[Path, ...]  # in the order torch opens them
    notes: tuple[str, ...]  # what the model does not cover on this install


def _use_global_deps(torch_dir: Path) -> bool:
    """torch._utils_internal.USE_GLOBAL_DEPS (True unless a build changed it)."""
    try:
        tree = ast.parse(read_text(torch_dir / "_utils_internal.py", MAX_SOURCE, follow=False))
    except (OSError, SyntaxError, ValueError):
        return True
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            if any(isinstance(t, ast.Name) and t.id == "USE_GLOBAL_DEPS" for t in node.targets):
                return bool(node.value.value)
    return True


def torch_import_dlopens(site_packages: Path, python_tag: str | None = None) -> TorchLoads:
    """What `import torch` dlopens from the torch in `site_packages`.

    `python_tag` ("311") picks the matching `_C.cpython-311-*.so` when several are installed.
    """
    torch_dir = site_packages / "torch"
    notes: list[str] = []
    dlopens: list[Path] = []
    if (torch_dir / "_rocm_init.py").exists():
        notes.append(
            "torch/_rocm_init.py present: this torch preloads ROCm from rocm-sdk wheels, which this model does not "
            "follow"
        )
    global_deps = torch_dir / "lib" / "libtorch_global_deps.so"
    if _use_global_deps(torch_dir) and global_deps.exists():
        dlopens.append(global_deps)
    candidates = sorted(torch_dir.glob("_C.cpython-*.so"))
    if python_tag:
        matching = [c for c in candidates if c.name.startswith(f"_C.cpython-{python_tag}")]
        candidates = matching or candidates
    if candidates:
        dlopens.append(candidates[0])
    else:
        notes.append(f"no {torch_dir}/_C.cpython-*.so: `import torch` cannot work in this venv")
    return TorchLoads(tuple(dlopens), tuple(notes))
