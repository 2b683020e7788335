"""GET a URL for a test of a server: (status, body), an HTTP error's status with an empty body instead of a raise."""

from __future__ import annotations

import urllib.error
import urllib.request


def http_get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, b""
