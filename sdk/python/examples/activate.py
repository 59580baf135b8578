#!/usr/bin/env python3
"""Activates a license key and keeps a heartbeat running.

    python3 examples/activate.py <license-key> [path/to/keywarden.json] [--beats N] [--base-url URL]

keywarden.json is looked up as: the path given, ./keywarden.json, then next to this script and
one folder up (the root of the SDK download). --beats defaults to 3 (0: beat until Ctrl-C).
Exit code 0 on success, 1 with the error code otherwise, 2 on bad usage.
"""
from __future__ import annotations

import argparse
import os
import sys

try:
    import keywarden
except ImportError:  # not installed: use the package next to this example (the SDK download)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import keywarden

from keywarden import Client, KeywardenError


def find_config(given: str | None) -> str:
    if given:
        return given
    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in ("keywarden.json", os.path.join(here, "keywarden.json"), os.path.join(os.path.dirname(here), "keywarden.json")):
        if os.path.isfile(candidate):
            return candidate
    return "keywarden.json"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description="Activate a Keywarden license key and beat.")
    p.add_argument("key", help="the license key")
    p.add_argument("config", nargs="?", help="path of keywarden.json")
    p.add_argument("--beats", type=int, default=3, help="stop after N verified beats (0: until Ctrl-C)")
    p.add_argument("--base-url", help="overrides base_url of keywarden.json")
    args = p.parse_args(argv)

    try:
        client = Client.from_config(find_config(args.config), base_url=args.base_url)
        app = client.init()
        print(f"connected to {app.name} (version {app.version})", flush=True)
        lic = client.activate_license(args.key)
        expires = lic.expires_at.isoformat() if lic.expires_at else "never"
        print(f"license ok: level {lic.level}, expires {expires}", flush=True)

        def on_beat(b: keywarden.BeatEvent) -> None:
            print(f"beat {b.index} verified (count {b.count})", flush=True)
            if args.beats and b.count >= args.beats:
                hb.stop()

        # A short interval when a beat count is asked for, so the demo finishes quickly (beating
        # faster than the server's interval is allowed; only late beats count as drift).
        hb = client.prepare_heartbeat(reauth=True, interval=1.0 if args.beats else None)
        print(f"heartbeat started (server interval {hb.beat_interval} s)", flush=True)
        killed: list[KeywardenError] = []
        hb.on("beat", on_beat)
        hb.on("degraded", lambda d: print(f"heartbeat degraded: {d.error.code} {d.error}", file=sys.stderr, flush=True))
        hb.on("recovered", lambda r: print("heartbeat recovered after re-authentication", file=sys.stderr, flush=True))
        hb.on("killed", lambda k: (killed.append(k.error), print(f"heartbeat killed: {k.error.code} {k.error}", file=sys.stderr, flush=True)))
        hb.on("stopped", lambda s: print("heartbeat stopped", flush=True))
        hb.start()
        try:
            hb.wait()
        except KeyboardInterrupt:
            hb.stop()
        return 1 if killed else 0
    except KeywardenError as e:
        print(f"failed: {e.code}{f' ({e.reason})' if e.reason else ''}: {e}", file=sys.stderr)
        if e.code == "update_required":
            print(f"download {e.latest_version} from {e.update_url}", file=sys.stderr)
        if e.retry_after is not None:
            print(f"retry after {e.retry_after} s", file=sys.stderr)
        return 1
    except keywarden.ConfigError as e:
        print(f"failed: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
