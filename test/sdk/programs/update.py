# The update program of test/helpers/sdk-updates.ts (its protocol is described there), with the Python SDK.
import dataclasses
import json
import os
import sys
from urllib.parse import urlsplit

from keywarden import Client, UpdateError

config, key, hwid, out_dir = sys.argv[1:5]
tamper = json.loads(os.environ.get("KW_DL_TAMPER_URLS", "{}"))


def say(obj):
    print(json.dumps(obj), flush=True)


c = Client.from_config(config)
c.init()
c.activate_license(key, hwid)
say({"step": "none", "upgrade": c.check_update("1.1.0", "stable", "linux", "x64")})
offer = c.check_update("1.0.0", "stable", "linux", "x64")
say({"step": "offer", "version": offer.version, "channel": offer.channel, "artifacts": [
    {"filename": a.filename, "platform": a.platform, "arch": a.arch, "size": a.size} for a in offer.artifacts]})
art = offer.artifacts[0]
seen = []
path = c.download_update(art, os.path.join(out_dir, "app.bin"), lambda got, total: seen.append((got, total)))
say({"step": "download", "path": path, "calls": len(seen), "last": list(seen[-1]),
     "monotonic": all(a[0] < b[0] for a, b in zip(seen, seen[1:]))})
for mode, base in sorted(tamper.items()):
    d = os.path.join(out_dir, mode)
    os.makedirs(d)
    u = urlsplit(art.url)
    spoiled = dataclasses.replace(art, url=base + u.path + (f"?{u.query}" if u.query else ""))
    try:
        c.download_update(spoiled, os.path.join(d, "app.bin"))
        say({"step": "tamper", "mode": mode, "error": None})
    except UpdateError as e:
        say({"step": "tamper", "mode": mode, "error": type(e).__name__, "reason": e.reason.value, "code": e.code.value,
             "files": sorted(os.listdir(d))})
