"""The strays fact: the uploaded verifier's `strays --json`, run on the host, parsed into a StraysReport."""

from __future__ import annotations

import json

from pyinfra.api import FactBase
from pyinfra.api.exceptions import FactProcessError

from roles.verifier import REMOTE_VERIFIER, verifier_command
from verify.api import StraysReport

_NO_PYTHON = "strays: python3 is not installed on this host, and the verifier needs it — apt-get install python3"


class DistroRocmStrays(FactBase):
    """The host's stray distro ROCm packages, or None while the verifier is not on the host yet (a plan made before
    its upload; the operation that uses this fact reads it again when it executes, after the upload)."""

    def command(self) -> str:
        # Exit 1 means "strays found", which is data, not a failure; exit 2 (no usable dpkg database) fails the host
        # with the verifier's own one-line message.
        return (
            f"if [ ! -f {REMOTE_VERIFIER} ]; then echo null; "
            f"elif ! command -v python3 >/dev/null; then echo '{_NO_PYTHON}' >&2; exit 2; "
            f"else {verifier_command('strays', '--json')} || [ $? -eq 1 ]; fi"
        )

    def process(self, output) -> StraysReport | None:
        try:
            data = json.loads("\n".join(output))
            return None if data is None else StraysReport.from_json(data)
        except (ValueError, KeyError, TypeError) as error:
            raise FactProcessError(f"the verifier's strays report is not usable ({error}): is {REMOTE_VERIFIER} "
                                   "from another version of this project?") from error
