"""keywarden.json parsing and client options."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import unittest

import _support
from keywarden import AsyncClient, Client, ClientOptions, Config, ConfigError, load_config, parse_config

GOOD_KEY = "Z7P1CneKviCF7Ws179UP02Vmjh+ezX1TCXb5UqUdRcM="


def good(**over: object) -> dict:
    c = {"format": 1, "base_url": "http://127.0.0.1:8080", "app_name": "Demo", "api_key": "kwpk", "version": "1.2",
         "response_keys": [{"kid": "k1", "alg": "Ed25519", "public_key": GOOD_KEY}]}
    c.update(over)
    return c


class ParseConfig(unittest.TestCase):
    def test_good_config(self) -> None:
        c = parse_config(good(future_field={"x": 1}, api_secret="s3cret"))
        self.assertIsInstance(c, Config)
        self.assertEqual((c.base_url, c.api_key, c.version, c.app_name, c.api_secret), ("http://127.0.0.1:8080", "kwpk", "1.2", "Demo", "s3cret"))
        self.assertEqual([k.kid for k in c.response_keys], ["k1"])
        self.assertNotIn("s3cret", repr(c), "the secret never shows in a repr")

    def test_empty_secret_means_none(self) -> None:
        self.assertIsNone(parse_config(good(api_secret="")).api_secret)
        self.assertIsNone(parse_config(good()).api_secret)

    def test_refusals(self) -> None:
        bad = {
            "format 2": good(format=2),
            "format true": good(format=True),
            "no format": {k: v for k, v in good().items() if k != "format"},
            "ftp url": good(base_url="ftp://x"),
            "no api_key": good(api_key=""),
            "version not str": good(version=2),
            "secret not str": good(api_secret=5),
            "no keys": good(response_keys=[]),
            "key not object": good(response_keys=["k1"]),
            "no kid": good(response_keys=[{"public_key": GOOD_KEY}]),
            "short key": good(response_keys=[{"kid": "k1", "public_key": "AAAA"}]),
            "junk key": good(response_keys=[{"kid": "k1", "public_key": "!" * 44}]),
            "rsa": good(response_keys=[{"kid": "k1", "alg": "RS256", "public_key": GOOD_KEY}]),
        }
        for name, raw in bad.items():
            with self.subTest(name):
                with self.assertRaises(ConfigError):
                    parse_config(raw)
        with self.assertRaises(ConfigError):
            parse_config([good()])  # type: ignore[arg-type]

    def test_load_config_file(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "keywarden.json")
            with open(p, "w", encoding="utf-8") as f:
                json.dump(good(), f)
            self.assertEqual(load_config(p).api_key, "kwpk")
            self.assertEqual(Client.from_config(p).config.api_key, "kwpk")
            with open(p, "w", encoding="utf-8") as f:
                f.write("{not json")
            with self.assertRaisesRegex(ConfigError, "not JSON"):
                load_config(p)
            with self.assertRaisesRegex(ConfigError, "cannot read"):
                load_config(os.path.join(d, "missing.json"))


class Options(unittest.TestCase):
    def test_defaults_and_overrides(self) -> None:
        c = Client.from_config(good())
        self.assertEqual((c.base_url, c.timeout, c.retries), ("http://127.0.0.1:8080", 10.0, 2))
        c = Client.from_config(good(), {"base_url": "http://other:1/", "timeout": 2.5, "retries": 0})
        self.assertEqual((c.base_url, c.timeout, c.retries), ("http://other:1", 2.5, 0))
        c = Client.from_config(good(), ClientOptions(timeout=3), retries=5)
        self.assertEqual((c.timeout, c.retries), (3.0, 5))
        self.assertEqual(AsyncClient.from_config(good(), timeout=4).client.timeout, 4.0)

    def test_bad_options(self) -> None:
        with self.assertRaisesRegex(ConfigError, "unknown client option"):
            Client.from_config(good(), {"timout": 3})
        with self.assertRaises(ConfigError):
            Client.from_config(good(), timeout=0)
        with self.assertRaisesRegex(ConfigError, "api_secret"):
            Client.from_config(good(), enc_key="abc")
        with self.assertRaisesRegex(ConfigError, "proxy"):
            Client.from_config(good(), proxy="socks5://127.0.0.1:1080")

    def test_config_error_is_a_value_error_not_exit(self) -> None:
        self.assertTrue(issubclass(ConfigError, ValueError))

    def test_api_key_is_the_hwid_salt(self) -> None:
        a = Client.from_config(good()).machine_hwid()
        b = Client.from_config(good(api_key="another")).machine_hwid()
        self.assertRegex(a, r"^[0-9a-f]{64}$")
        self.assertNotEqual(a, b)
        self.assertEqual(a, _support.sys.modules["keywarden"].machine_hwid("kwpk"))


class MissingDependency(unittest.TestCase):
    def test_import_without_cryptography_says_how_to_install_it(self) -> None:
        code = "import sys; sys.modules['cryptography'] = None; import keywarden"
        r = subprocess.run([sys.executable, "-c", code], cwd=str(_support.SDK_ROOT), capture_output=True, text=True, timeout=60,
                           env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("pip install cryptography", r.stderr)


if __name__ == "__main__":
    unittest.main()
