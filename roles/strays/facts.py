"""The strays fact: the uploaded verifier's `strays --json`, run on the host, parsed into a StraysReport."""

from __future__ import annotations

import json
import shlex

from pyinfra.api import FactBase
from pyinfra.api.exceptions import FactProcessError

from roles.verifier import REMOTE_VERIFIER, verifier_command, verifier_sha256
from verify.debian.strays import StraysReport

_NO_PYTHON = "strays: python3 is not installed on this host, and the verifier needs it — apt-get install python3"
STALE = "stale"  # the fact's value while the file on the host is not the verifier this checkout built


class DistroRocmStrays(FactBase):
    """The host's stray distro ROCm packages; None while the verifier is not on the host yet, STALE while the file
    there is not the verifier this controller built (another checkout's, or changed on the host) — at plan time,
    before this run's upload. Root never runs a verifier whose sha256 it has not checked, so neither case runs it;
    the operation that uses this fact reads it again when it executes, after the upload."""

    def command(self) -> str:
        sha = shlex.quote(f"{verifier_sha256()}  {REMOTE_VERIFIER}")
        # Exit 1 means "strays found", which is data, not a failure; exit 2 (no usable dpkg database) fails the host
        # with the verifier's own one-line message. verifier_command checks the sha256 again right before the run.
        return (
            f"if [ ! -f {REMOTE_VERIFIER} ]; then echo null; "
            f"elif ! echo {sha} | sha256sum --check --status 2>/dev/null; then echo '\"{STALE}\"'; "
            f"elif ! command -v python3 >/dev/null; then echo '{_NO_PYTHON}' >&2; exit 2; "
            f"else {verifier_command('strays', '--json')} || [ $? -eq 1 ]; fi"
        )

    def process(self, output) -> StraysReport | str | None:
        try:
            data = json.loads("\n".join(output))
            return data if data in (None, STALE) else StraysReport.from_json(data)
        except (ValueError, KeyError, TypeError) as error:
            raise FactProcessError(
                f"the verifier's strays report is not usable ({error}): is {REMOTE_VERIFIER} "
                "from another version of this project?"
            ) from error
