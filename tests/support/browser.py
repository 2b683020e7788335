"""A real headless Chromium for tests that judge a page the way a person sees it: Debian's `chromium`, driven through
Debian's `chromedriver` with the W3C WebDriver protocol (plain HTTP on loopback, through `requests`, which the project
already depends on — the six calls a test needs do not justify a browser-automation library).

    with Browser.start(tmp_path) as browser:
        browser.open(page)                      # a file: URL; returns once the page has loaded
        browser.type_into("#filter", "gfx90a")  # real key events into the element
        browser.script("return …")              # JavaScript in the page, its value back
        browser.screenshot(tmp_path / "page.png")

`ensure_installed()` installs the two packages with apt when they are missing (as root; bin/bootstrap lists them
too). The browser runs with the flags that work on a closed network (no sandbox: tests run as root; no GPU, QUIC,
first-run, background networking, component updates or sync) and a new empty profile under the test's tmp dir.
chromedriver listens on a free loopback port; the session and chromedriver are ended on exit, also after a failure.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import requests

from localfleet.ports import LOOPBACK, free_port
from localfleet.procs import stop_processes

PACKAGES = ("chromium", "chromium-driver")
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1600,1200",
)
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # the W3C key of an element reference


def ensure_installed() -> None:
    if all(shutil.which(Path(p).name) for p in (CHROMIUM, CHROMEDRIVER)):
        return
    subprocess.run(["apt-get", "update", "-qq"], check=True, capture_output=True)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", *PACKAGES],
        check=True,
        capture_output=True,
        env={"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
    )


class WebDriverError(AssertionError):
    pass


class Browser:
    def __init__(self, driver: subprocess.Popen, url: str, session: str, log: Path):
        self.driver, self.url, self.session, self.log = driver, url, session, log

    @classmethod
    def start(cls, workdir: Path, timeout_s: float = 60) -> Browser:
        ensure_installed()
        profile = workdir / "chromium-profile"
        profile.mkdir(parents=True)
        log = workdir / "chromedriver.log"
        for _ in range(5):  # another process may take the free port first
            port = free_port()
            # Its own process group: chromedriver and every Chromium process it starts end together (_stop).
            driver = subprocess.Popen(
                [CHROMEDRIVER, f"--port={port}", f"--log-path={log}"],
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            url = f"http://{LOOPBACK}:{port}"
            if _ready(driver, url, timeout_s):
                break
            _stop(driver)
        else:
            raise WebDriverError(f"chromedriver did not start (see {log})")
        try:
            options = {"binary": CHROMIUM, "args": [*FLAGS, f"--user-data-dir={profile}"]}
            answer = _call(
                "POST",
                f"{url}/session",
                {
                    "capabilities": {
                        "alwaysMatch": {
                            "browserName": "chrome",
                            "goog:chromeOptions": options,
                            "goog:loggingPrefs": {"browser": "ALL"},
                        }
                    }
                },
                timeout_s,
            )
            return cls(driver, url, answer["sessionId"], log)
        except BaseException:
            _stop(driver)
            raise

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        try:
            _call("DELETE", f"{self.url}/session/{self.session}", None, 30)
        except (WebDriverError, requests.RequestException):
            pass  # chromedriver's end below takes the browser with it
        finally:
            _stop(self.driver)

    def _session(self, method: str, path: str, body: dict | None = None):
        return _call(method, f"{self.url}/session/{self.session}{path}", body, 60)

    def open(self, page: Path) -> None:
        """Navigate to the file and return once it has loaded (WebDriver's default page-load strategy)."""
        self._session("POST", "/url", {"url": page.resolve().as_uri()})

    def script(self, source: str, *args):
        return self._session("POST", "/execute/sync", {"script": source, "args": list(args)})

    def element(self, css: str) -> str:
        return self._session("POST", "/element", {"using": "css selector", "value": css})[ELEMENT]

    def type_into(self, css: str, text: str) -> None:
        self._session("POST", f"/element/{self.element(css)}/value", {"text": text})

    def clear(self, css: str) -> None:
        self._session("POST", f"/element/{self.element(css)}/clear", {})

    def click(self, css: str) -> None:
        self._session("POST", f"/element/{self.element(css)}/click", {})

    def screenshot(self, path: Path) -> Path:
        path.write_bytes(base64.b64decode(self._session("GET", "/screenshot")))
        return path

    def print_pdf(self, path: Path) -> Path:
        """The page printed (WebDriver's Print Page: what Chromium's print dialog would make), as a PDF."""
        path.write_bytes(base64.b64decode(self._session("POST", "/print", {"orientation": "landscape"})))
        return path

    def emulate_media(self, media: str) -> None:
        """CSS media as for `media` ("print", or "" for the screen again), through chromedriver's DevTools bridge."""
        self._session("POST", "/goog/cdp/execute", {"cmd": "Emulation.setEmulatedMedia", "params": {"media": media}})

    def console(self) -> list[dict]:
        """The browser's console and network-error log since the last call (chromedriver's log endpoint)."""
        return self._session("POST", "/se/log", {"type": "browser"})


def _call(method: str, url: str, body: dict | None, timeout_s: float):
    response = requests.request(method, url, json=body, timeout=timeout_s)
    value = response.json().get("value") if response.content else None
    if response.status_code != 200:
        error = value.get("message", value) if isinstance(value, dict) else value
        raise WebDriverError(f"WebDriver {method} {url.rsplit('/session', 1)[-1] or '/'}: {error}")
    return value


def _ready(driver: subprocess.Popen, url: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and driver.poll() is None:
        try:
            if requests.get(f"{url}/status", timeout=5).json()["value"]["ready"]:
                return True
        except (requests.RequestException, ValueError, KeyError):
            pass
        time.sleep(0.1)
    return False


def _stop(driver: subprocess.Popen) -> None:
    if driver.poll() is None:
        stop_processes([driver.pid])
    driver.wait()
    try:  # what chromedriver started and left behind (a browser whose session was never deleted)
        os.killpg(driver.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
