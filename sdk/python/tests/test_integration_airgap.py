"""Air-gapped machines end to end against the real server and real relay processes prepared by
test/helpers/airgap-harness.ts: an activation request answered through the dashboard route and
completed, an answer to an older request refused, and a seat leased from a relay, renewed (by hand
and by its own timer), released, refused when every seat is taken, and refused when the relay serves
a pool signed by another key.

Pending server side: while the server has no /api/apps/{id}/offline-activations these tests are skipped
with one line ("air-gapped pending"); KW_REQUIRE_AIRGAP=1 makes that a failure.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request
from typing import Any, List, Tuple

import _support  # noqa: F401 - puts the SDK on sys.path
from keywarden import Client, ErrorCode, KeywardenError, OfflineReason

ENV = os.environ
_ran: List[str] = []


def _call(method: str, url: str, body: Any = None, token: str = "") -> Tuple[int, Any]:
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["Authorization"] = "Bearer " + token
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            raw = r.read()
            return r.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        raw = e.read()
        return e.code, json.loads(raw) if raw else None


def require_airgap() -> None:
    if not ENV.get("KW_BASE_URL"):
        if ENV.get("KW_REQUIRE_INTEGRATION") == "1":
            raise RuntimeError("KW_REQUIRE_INTEGRATION=1 but KW_BASE_URL is not set")
        raise unittest.SkipTest("integration tests need a server: set KW_BASE_URL")
    if ENV.get("KW_AIRGAP_ERROR"):
        raise RuntimeError("the harness could not prepare the relays: " + ENV["KW_AIRGAP_ERROR"])
    if not ENV.get("KW_AIRGAP_RELAY_URL"):
        if ENV.get("KW_REQUIRE_AIRGAP") == "1":
            raise RuntimeError("KW_REQUIRE_AIRGAP=1 but the server has no offline-activations route")
        raise unittest.SkipTest("air-gapped pending: the server has no /api/apps/{id}/offline-activations")


def answer(request: str) -> str:
    """The operator's side: the dashboard route answers the request."""
    status, body = _call("POST", f"{ENV['KW_BASE_URL']}/api/apps/{ENV['KW_AIRGAP_APP_ID']}/offline-activations",
                         {"request": request}, ENV["KW_OWNER_TOKEN"])
    if status != 200:
        raise AssertionError(f"offline-activations answered {status} {body}")
    return body["response"]


def relay_status(url: str) -> Any:
    return _call("GET", url + "/relay/v1/status")[1]


def tearDownModule() -> None:
    print(f"\nair-gapped tests run: {len(_ran)}", file=sys.stderr, flush=True)


class Airgap(unittest.TestCase):
    keys: List[str] = []

    @classmethod
    def setUpClass(cls) -> None:
        require_airgap()
        cls.keys = ENV["KW_AIRGAP_KEYS"].split(",")
        cls.dir = tempfile.mkdtemp(prefix="kw-py-airgap-")

    def setUp(self) -> None:
        _ran.append(self._testMethodName)

    def client(self, name: str, **options: Any) -> Client:
        return Client.from_config(
            ENV["KW_AIRGAP_CONFIG"], state_file=os.path.join(self.dir, name + ".json"), **options
        )

    def error(self, fn: Any, *args: Any) -> KeywardenError:
        with self.assertRaises(KeywardenError) as ctx:
            fn(*args)
        return ctx.exception

    # --- activation by file ----------------------------------------------------------------------
    def test_a_request_answered_by_the_dashboard_completes(self) -> None:
        c = self.client("req-a")
        hwid = "py-airgap-machine-a"
        req = c.activation_request(self.keys.pop(), hwid, components={"cpu": "c1", "disk": "d1"})
        self.assertTrue(req.startswith("kwreq1."))
        self.assertTrue(os.path.exists(c.request_file), "the nonce is kept on disk")
        lic = c.complete_activation(answer(req), hwid)
        self.assertEqual((lic.app_id, lic.hwid, lic.level), (ENV["KW_AIRGAP_APP_ID"], hwid, 3))
        # A later start (a new client, same files) accepts the saved answer as any offline file.
        self.assertEqual(self.client("req-a").load_offline(answer(req), hwid).license_id, lic.license_id)

    def test_an_answer_to_an_older_request_is_refused(self) -> None:
        c = self.client("req-b")
        hwid = "py-airgap-machine-b"
        key = self.keys.pop()
        old = answer(c.activation_request(key, hwid))
        c.activation_request(key, hwid)  # a newer request replaces the kept nonce
        e = self.error(c.complete_activation, old, hwid)
        self.assertEqual((e.code, e.reason), (ErrorCode.OFFLINE_INVALID, OfflineReason.WRONG_REQUEST))
        # Another machine's answer is refused before its nonce is looked at.
        other = self.client("req-b-other")
        e = self.error(other.complete_activation, answer(other.activation_request(self.keys.pop(), "py-airgap-other")), hwid)
        self.assertEqual(e.reason, OfflineReason.WRONG_HWID)

    # --- seats from a relay ----------------------------------------------------------------------
    def test_a_seat_is_leased_renewed_and_released(self) -> None:
        url = ENV["KW_AIRGAP_RELAY_URL"]
        c = self.client("relay-a")
        before = relay_status(url)["in_use"]
        lease = c.lease_seat(url, "py-relay-a")
        try:
            self.assertTrue(lease.active)
            self.assertEqual((lease.pool.app_id, lease.pool.seats), (ENV["KW_AIRGAP_APP_ID"], int(ENV["KW_AIRGAP_SEATS"])))
            self.assertEqual(relay_status(url)["in_use"], before + 1)
            first = lease.expires_at
            time.sleep(1.1)
            lease.renew()
            self.assertGreater(lease.expires_at, first)
            self.assertEqual(lease.renewals, 1)
        finally:
            lease.release()
        self.assertFalse(lease.active)
        self.assertEqual(relay_status(url)["in_use"], before)

    def test_the_lease_renews_itself_before_it_expires(self) -> None:
        # The client's clock runs 14 min 50 s ahead: the 15-minute lease has 10 s left, renewed at half that.
        c = self.client("relay-b", clock=lambda: time.time() + 890)
        done = threading.Event()
        lease = c.lease_seat(ENV["KW_AIRGAP_RELAY_URL"], "py-relay-b")
        try:
            deadline = time.time() + 60
            while lease.renewals == 0 and time.time() < deadline and not done.wait(0.2):
                pass
            self.assertGreaterEqual(lease.renewals, 1, "renewed by its own thread")
            self.assertIsNone(lease.lost)
        finally:
            lease.release()

    def test_every_seat_taken_is_session_limit_until_one_is_released(self) -> None:
        url = ENV["KW_AIRGAP_RELAY_URL"]
        c = self.client("relay-c")
        seats = int(ENV["KW_AIRGAP_SEATS"])
        held = [c.lease_seat(url, f"py-relay-seat-{i}") for i in range(seats)]
        try:
            e = self.error(c.lease_seat, url, "py-relay-one-too-many")
            self.assertEqual((e.code, e.status, e.detail), (ErrorCode.SESSION_LIMIT, 409, "No seats available"))
            held.pop().release()
            held.append(c.lease_seat(url, "py-relay-one-too-many"))
        finally:
            for lease in held:
                lease.release()

    def test_a_relay_serving_a_forged_pool_is_refused(self) -> None:
        c = self.client("relay-d")
        e = self.error(c.lease_seat, ENV["KW_AIRGAP_FORGED_RELAY_URL"], "py-relay-forged")
        self.assertEqual((e.code, e.reason), (ErrorCode.OFFLINE_INVALID, OfflineReason.BAD_SIGNATURE))
        self.assertEqual(c.entitlements, ())


if __name__ == "__main__":
    unittest.main()
