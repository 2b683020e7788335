"""The strays fact: the installed verifier's `strays --json` (this checkout's version), run on the host, parsed into a
StraysReport."""

from __future__ import annotations

import json

from pyinfra.api import FactBase
from pyinfra.api.exceptions import FactProcessError

from roles.verifier import LAUNCHER, REFUSED, verifier_command
from verify.debian.strays import StraysReport

_NO_PYTHON = "strays: python3 is not installed on this host, and the verifier needs it — apt-get install python3"


class DistroRocmStrays(FactBase):
    """The host's stray distro ROCm packages; None while this checkout's verifier cannot run there (not installed
    yet, another checkout's, or refused by its launcher) — at plan time, before this run's install. The operation
    that uses this fact reads it again when it executes, after the install."""

    def command(self) -> str:
        # Exit 1 means "strays found", which is data, not a failure; exit 2 (no usable dpkg database) fails the host
        # with the verifier's own one-line message; REFUSED (not installed, not this checkout's): null.
        return (
            f"if ! command -v python3 >/dev/null; then echo '{_NO_PYTHON}' >&2; exit 2; fi; "
            f"{verifier_command('strays', '--json')}; s=$?; "
            f"if [ $s -eq {REFUSED} ]; then echo null; elif [ $s -gt 1 ]; then exit $s; fi"
        )

    def process(self, output) -> StraysReport | None:
        try:
            data = json.loads("\n".join(output))
            return None if data is None else StraysReport.from_json(data)
        except (ValueError, KeyError, TypeError) as error:
            raise FactProcessError(
                f"the verifier's strays report is not usable ({error}): is {LAUNCHER} from another version of this "
                "project?"
            ) from error
