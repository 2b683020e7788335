"""A host's small configuration files (/etc/environment, profile.d scripts, modprobe.d files, apt's lists and
preferences …) read as hostile input, through the verifier's safe-open helper (verify/safe_read.py: regular files
only, never blocking, bounded, under the static part's time limit) — and what the day-2 checks want from it: the text,
or that the file is absent, or one line saying why it cannot be used, never an exception.
"""

from __future__ import annotations

import os

from verify.safe_read import listdir, read_text

CONFIG_LIMIT = 256 * 1024  # /etc/environment, a profile.d script, a modprobe.d file, a list file: a few KB each


def read_optional(path: str | os.PathLike, limit: int = CONFIG_LIMIT) -> tuple[str | None, str | None]:
    """(text, None); (None, None) when the file does not exist; (None, one line) when it cannot be used (a FIFO, a
    device, too large, unreadable). Undecodable bytes are replaced: a comment in Latin-1 is no reason to stop."""
    try:
        return read_text(path, limit, errors="replace"), None
    except (FileNotFoundError, NotADirectoryError):
        return None, None
    except OSError as error:
        return None, f"{error.filename or os.fspath(path)}: {error.strerror or error}"


def list_dir(path: str | os.PathLike) -> list[str]:
    """The names in a directory, sorted; [] when it does not exist or is not a directory."""
    try:
        return sorted(listdir(path))
    except OSError:
        return []
