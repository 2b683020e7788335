"""MOCK at a boundary that cannot exist here: a torch CUDA build with an NVIDIA H100 (SM 9.0, 132 SMs) visible.

Put this directory on PYTHONPATH of a process whose python has the *CPU* torch 2.13.0: at start-up it makes torch
report CUDA 12.8 and one device with the properties bitsandbytes 0.50.1's CUDA dispatch reads
(`_gemm_4bit_use_custom_cuda`: compute capability and SM count). Everything after that is real: bitsandbytes' real
library selection and its fallback to the mock library (no CUDA library loads here), and its real dispatch code,
which the NF4 probe asks which kernel each shape would take. No tensor can go to the device: the NF4 runs on it fail.
A python without torch (the verifier's own) is left alone.
"""

import types

try:
    import torch
except ImportError:
    torch = None

if torch is not None:
    torch.version.cuda = "12.8"
    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: 1
    torch.cuda.get_device_capability = lambda *args, **kwargs: (9, 0)
    torch.cuda.get_device_properties = lambda index: types.SimpleNamespace(
        name="stand-in NVIDIA H100 (no GPU here)", major=9, minor=0, multi_processor_count=132, total_memory=80 * 2**30
    )
    # bitsandbytes' CUDA backend module reads this at import; the CPU build has no such attribute.
    torch._C._cuda_getCurrentRawStream = lambda *args: 0
