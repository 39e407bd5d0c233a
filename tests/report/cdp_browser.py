"""A headless Chromium driven over the DevTools protocol (a websocket on loopback, aiohttp).

Enough to open a file, set the window to a laptop's or a phone's width, evaluate a
JavaScript expression (DevTools evaluation is not subject to the page's CSP), take a
screenshot, and record every request the page made. Name resolution is mapped to nowhere and
the proxy to a closed port, so even a page that tried could not reach the network.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def find_chromium() -> str | None:
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


class Page:
    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.requests: list[str] = []
        self.failed: list[str] = []
        self.events: list[dict[str, Any]] = []

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        msg_id = next(self.ids)
        await self.ws.send_str(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            msg = await self.ws.receive(timeout=60)
            data = json.loads(msg.data)
            if data.get("id") == msg_id:
                if "error" in data:
                    raise RuntimeError(f"{method}: {data['error']}")
                return dict(data.get("result", {}))
            self._event(data)

    def _event(self, data: dict[str, Any]) -> None:
        method = data.get("method")
        params = data.get("params", {})
        self.events.append(data)
        if method == "Network.requestWillBeSent":
            self.requests.append(str(params["request"]["url"]))
        elif method == "Network.loadingFailed":
            self.failed.append(str(params.get("errorText")))

    async def wait_for(self, method: str, timeout: float = 60) -> None:
        if any(e.get("method") == method for e in self.events):
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = await self.ws.receive(timeout=deadline - time.monotonic())
            data = json.loads(msg.data)
            self._event(data)
            if data.get("method") == method:
                return
        raise TimeoutError(method)

    async def open(self, url: str, width: int, height: int, mobile: bool) -> None:
        await self.send(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=mobile,
        )
        self.events.clear()
        self.requests.clear()
        self.failed.clear()
        await self.send("Page.navigate", url=url)
        await self.wait_for("Page.loadEventFired")

    async def evaluate(self, expression: str) -> Any:
        result = await self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(str(result["exceptionDetails"]))
        return result["result"].get("value")

    async def screenshot(self, path: Path, full_page: bool = False) -> None:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
            size = await self.evaluate(
                "({w: document.documentElement.scrollWidth,"
                " h: document.documentElement.scrollHeight})"
            )
            params["clip"] = {"x": 0, "y": 0, "width": size["w"], "height": size["h"], "scale": 1}
        shot = await self.send("Page.captureScreenshot", **params)
        path.write_bytes(base64.b64decode(shot["data"]))


@contextlib.asynccontextmanager
async def chromium_page(binary: str) -> AsyncIterator[Page]:
    """A fresh headless Chromium (own profile, no network) and its one page."""
    # Chromium's helper processes may still be writing their profile as it exits.
    with tempfile.TemporaryDirectory(
        prefix="dutchbook-chromium-", ignore_cleanup_errors=True
    ) as profile:
        proc = subprocess.Popen(
            [
                binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                # Nothing can leave: every name resolves nowhere, every proxy is a closed port.
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                "--proxy-server=http://127.0.0.1:9",
                "--proxy-bypass-list=<-loopback>",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: stopped whole, helpers included
        )
        try:
            port_file = Path(profile) / "DevToolsActivePort"
            deadline = time.monotonic() + 60
            while not port_file.exists() or not port_file.read_text().strip():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("chromium did not start its DevTools endpoint")
                await asyncio.sleep(0.1)
            port = int(port_file.read_text().splitlines()[0])
            async with aiohttp.ClientSession() as session:
                async with session.get(f"http://127.0.0.1:{port}/json/list") as resp:
                    targets = await resp.json()
                target = next(t for t in targets if t.get("type") == "page")
                async with session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                    page = Page(ws)
                    await page.send("Page.enable")
                    await page.send("Network.enable")
                    yield page
        finally:
            _stop_group(proc)


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop the browser this module started and its helpers (its own process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
