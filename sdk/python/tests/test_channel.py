"""The realtime channel against a real server (test/sdk/python.test.ts runs these with the SDK
harness): beats on the channel, update_required, notice and a ban pushed to the running heartbeat
as events; and REST beats when the server (here a proxy in front of it) offers no channel.

Each test makes its own application through the dashboard API, so it can change its settings,
and spends one init and one license call of 127.0.0.1's budget.
"""
from __future__ import annotations

import json
import os
import socket
import threading
import time
import unittest
import urllib.request
from typing import Any, Dict, List, Optional

import _support  # noqa: F401  (sys.path)
from keywarden import Client

ENV = os.environ
BASE = ENV.get("KW_BASE_URL")
CODE = "abcdef0123456789"


def setUpModule() -> None:
    if not BASE:
        if ENV.get("KW_REQUIRE_INTEGRATION") == "1":
            raise RuntimeError("KW_REQUIRE_INTEGRATION=1 but KW_BASE_URL is not set")
        raise unittest.SkipTest("channel tests need a server: set KW_BASE_URL (test/sdk/python.test.ts does)")


def owner(method: str, path: str, body: Optional[Dict[str, Any]] = None) -> Any:
    data = json.dumps(body).encode("utf-8") if body is not None else None
    req = urllib.request.Request(f"{BASE}{path}", data=data, method=method, headers={
        "Authorization": f"Bearer {ENV['KW_OWNER_TOKEN']}", "Content-Type": "application/json",
    })
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read().decode("utf-8") or "null")


def fresh_app(base_url: str) -> Dict[str, Any]:
    app = owner("POST", "/apps", {"name": f"py channel {time.time_ns()}"})
    owner("PATCH", f"/apps/{app['id']}", {"heartbeat_interval": 5})
    key = owner("POST", f"/apps/{app['id']}/licenses", {"amount": 1, "duration": 30, "unit": "days"})[0]["key"]
    with urllib.request.urlopen(f"{BASE}/api/client/keys", timeout=10) as r:
        published = json.loads(r.read().decode("utf-8"))["keys"]
    config = {"format": 1, "base_url": base_url, "api_key": app["api_key"], "version": "1.0", "response_keys": published}
    return {"id": app["id"], "key": key, "config": config}


class Events:
    """Collects heartbeat events of the given names and lets a test wait for one."""

    def __init__(self, hb: Any, names: List[str]) -> None:
        self.got: List[tuple] = []
        self.cond = threading.Condition()
        for n in names:
            hb.on(n, lambda e, n=n: self._add(n, e))

    def _add(self, name: str, e: Any) -> None:
        with self.cond:
            self.got.append((name, e))
            self.cond.notify_all()

    def wait(self, name: str, timeout: float = 5.0, pred: Any = lambda e: True) -> Any:
        end = time.monotonic() + timeout
        with self.cond:
            while True:
                for n, e in self.got:
                    if n == name and pred(e):
                        return e
                left = end - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {name} event within {timeout} s; got {[n for n, _ in self.got]}")
                self.cond.wait(left)


class ChannelIntegration(unittest.TestCase):
    def test_pushes_reach_the_running_heartbeat_as_events(self) -> None:
        app = fresh_app(BASE or "")
        c = Client.from_config(app["config"])
        c.init()
        c.activate_license(app["key"], "sdk-py-channel-aaaa")
        hb = c.prepare_heartbeat("sdk-py-channel-01", CODE, interval=0.1, debugger_detected=lambda: False)
        ev = Events(hb, ["beat", "revoked", "killed", "update_required", "notice", "channel"])
        hb.start()
        ev.wait("beat", pred=lambda b: b.index >= 2)
        self.assertTrue(hb.on_channel)

        owner("PATCH", f"/apps/{app['id']}", {"force_update": True, "version": "2.0", "update_url": "https://example.com/2.0", "update_message": "Get 2.0"})
        u = ev.wait("update_required")
        self.assertEqual((u.latest_version, u.update_url, u.message), ("2.0", "https://example.com/2.0", "Get 2.0"))
        owner("POST", f"/api/apps/{app['id']}/notice", {"message": "Hello from the vendor"})
        self.assertEqual(ev.wait("notice").message, "Hello from the vendor")

        lic = owner("GET", f"/api/apps/{app['id']}/licenses")["items"][0]["id"]
        t0 = time.monotonic()
        owner("PATCH", f"/api/licenses/{lic}/ban", {"banned": True})
        self.assertEqual(ev.wait("revoked").reason, "license_banned")
        self.assertLess(time.monotonic() - t0, 1.0)
        self.assertEqual(ev.wait("killed").error.code, "heartbeat_killed")
        self.assertFalse(hb.running)

    def test_beats_over_rest_when_no_channel_is_offered(self) -> None:
        proxy = NoChannelProxy(BASE or "")
        try:
            app = fresh_app(proxy.url)
            c = Client.from_config(app["config"])
            c.init()
            c.activate_license(app["key"], "sdk-py-channel-bbbb")
            hb = c.prepare_heartbeat("sdk-py-channel-02", CODE, interval=0.05, debugger_detected=lambda: False)
            ev = Events(hb, ["beat", "channel", "degraded"])
            hb.start()
            ev.wait("beat", pred=lambda b: b.index >= 3)
            self.assertFalse(hb.on_channel)
            self.assertEqual(proxy.upgrades, 1)  # asked once; a server without the channel is not asked again
            self.assertEqual([n for n, _ in ev.got if n == "degraded"], [])
            hb.stop()
        finally:
            proxy.close()


class NoChannelProxy:
    """Passes HTTP through to the server; answers every WebSocket upgrade with a plain 404."""

    def __init__(self, base: str) -> None:
        host, port = base.replace("http://", "").split(":")
        self.target = (host, int(port))
        self.upgrades = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        first = client.recv(65536)
        if first.startswith(b"GET /api/client/ws"):
            self.upgrades += 1
            client.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            client.close()
            return
        upstream = socket.create_connection(self.target)
        upstream.sendall(first)

        def pipe(a: socket.socket, b: socket.socket) -> None:
            try:
                while True:
                    d = a.recv(65536)
                    if not d:
                        break
                    b.sendall(d)
            except OSError:
                pass
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
        pipe(client, upstream)

    def close(self) -> None:
        self.sock.close()


if __name__ == "__main__":
    unittest.main()
