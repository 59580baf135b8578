"""sdk/vectors/artifacts.json: every case downloaded for real (from a local HTTP server serving the
case's bytes) through Client.download_update, which must accept it or refuse it with the reason the
case names, leaving no file behind when it refuses."""
from __future__ import annotations

import base64
import http.server
import os
import tempfile
import threading
import unittest
from typing import List, Tuple

import _support  # noqa: F401  (sys.path)
from keywarden import Artifact, Client, ErrorCode, UpdateError, UpdateReason


class _Files(http.server.BaseHTTPRequestHandler):
    files: dict = {}

    def do_GET(self) -> None:  # noqa: N802
        body = self.files.get(self.path)
        if body is None:
            refusal = b'{"detail":"Download link expired"}'
            self.send_response(403)
            self.send_header("Content-Length", str(len(refusal)))
            self.end_headers()
            self.wfile.write(refusal)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class ArtifactVectors(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Files)
        threading.Thread(target=cls.server.serve_forever, daemon=True).start()
        cls.base = f"http://127.0.0.1:{cls.server.server_address[1]}"

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.shutdown()
        cls.server.server_close()

    def client(self, v: dict, app_id: str) -> Client:
        return Client({"format": 1, "base_url": self.base, "api_key": "k", "app_id": app_id,
                       "response_keys": v["pinned_keys"]})

    def artifact(self, c: dict, url: str) -> Artifact:
        a = c["artifact"]
        return Artifact(app_id=c["app_id"], version=c["version"], filename=a["filename"], platform="any", arch="any",
                        size=a["size"], sha512=a["sha512"], signature=a["signature"], kid=a["kid"], url=url,
                        url_expires_at=None)

    def test_every_case_downloads_or_is_refused_for_its_reason(self) -> None:
        v = _support.load_vectors(self, "artifacts.json")
        seen = set()
        for i, c in enumerate(v["cases"]):
            with self.subTest(case=c["name"]), tempfile.TemporaryDirectory() as d:
                data = base64.b64decode(c["downloaded"])
                _Files.files[f"/dl/{i}"] = data
                target = os.path.join(d, c["artifact"]["filename"])
                progress: List[Tuple[int, int]] = []
                client = self.client(v, c["app_id"])
                art = self.artifact(c, f"{self.base}/dl/{i}")
                if c["valid"]:
                    self.assertEqual(client.download_update(art, target, lambda r, t: progress.append((r, t))), target)
                    with open(target, "rb") as f:
                        self.assertEqual(f.read(), data)
                    self.assertEqual(os.listdir(d), [c["artifact"]["filename"]])
                    if data:
                        self.assertEqual(progress[-1], (len(data), len(data)))
                else:
                    with self.assertRaises(UpdateError) as cm:
                        client.download_update(art, target, lambda r, t: progress.append((r, t)))
                    self.assertEqual(cm.exception.reason, c["reason"])
                    self.assertIs(cm.exception.code, ErrorCode.VERIFICATION)
                    self.assertEqual(os.listdir(d), [], "nothing left behind")
                    seen.add(c["reason"])
        self.assertEqual(sorted(seen), sorted(v["reasons"]))

    def test_a_refused_link_is_download_failed_and_keeps_an_existing_target(self) -> None:
        v = _support.load_vectors(self, "artifacts.json")
        c = v["cases"][0]
        with tempfile.TemporaryDirectory() as d:
            target = os.path.join(d, "app.bin")
            with open(target, "wb") as f:
                f.write(b"the running version")
            with self.assertRaises(UpdateError) as cm:
                self.client(v, c["app_id"]).download_update(self.artifact(c, f"{self.base}/gone"), target)
            self.assertIs(cm.exception.reason, UpdateReason.DOWNLOAD_FAILED)
            self.assertIs(cm.exception.code, ErrorCode.SERVER)
            self.assertEqual(cm.exception.status, 403)
            self.assertEqual(cm.exception.detail, "Download link expired")
            self.assertEqual(os.listdir(d), ["app.bin"])
            with open(target, "rb") as f:
                self.assertEqual(f.read(), b"the running version")

    def test_an_unreachable_link_is_a_network_download_failure(self) -> None:
        v = _support.load_vectors(self, "artifacts.json")
        c = v["cases"][0]
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(UpdateError) as cm:
                self.client(v, c["app_id"]).download_update(self.artifact(c, "http://127.0.0.1:9/x"), os.path.join(d, "a"))
            self.assertIs(cm.exception.reason, UpdateReason.DOWNLOAD_FAILED)
            self.assertIs(cm.exception.code, ErrorCode.NETWORK)
            self.assertEqual(os.listdir(d), [])


if __name__ == "__main__":
    unittest.main()
