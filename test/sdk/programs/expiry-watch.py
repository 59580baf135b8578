"""Expiry while running (docs/protocol.md 12.8) with the Python SDK: activates a key, beats on the realtime
channel and reports what the heartbeat tells (protocol: test/helpers/sdk-expiry.ts).
Usage: expiry-watch.py <keywarden.json> <license key> <hwid>"""
import sys
import threading
import time

from keywarden import Client


def now_ms() -> int:
    return int(time.time() * 1000)


def say(line: str) -> None:
    print(line, flush=True)


def main() -> int:
    config, key, hwid = sys.argv[1:4]
    c = Client.from_config(config)
    c.init()
    c.activate_license(key, hwid)
    first = threading.Event()

    def on_beat(e) -> None:
        say(f"beat {e.index} {now_ms()}")
        first.set()

    hb = c.start_heartbeat(
        "expiry-watch-py", "abcdef0123456789", interval=0.3, debugger_detected=lambda: False,
        on_beat=on_beat,
        on_expired=lambda e: say(f"expired {now_ms()}"),
        on_killed=lambda e: say(f"killed {e.error.code.value} {now_ms()}"),
    )
    hb.on("revoked", lambda e: say(f"revoked {e.reason} {now_ms()}"))
    if not first.wait(10):
        say("no first beat")
        return 1
    say(f"ready {1 if hb.on_channel else 0}")
    ended = hb.wait(30)
    say(f"state {hb.state}")
    if not ended:
        hb.stop()
    return 0 if ended else 1


if __name__ == "__main__":
    sys.exit(main())
