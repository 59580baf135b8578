"""AsyncClient and AsyncHeartbeat against FakeKeywarden: the same calls awaited, heartbeat events
delivered on the event loop (plain and coroutine listeners, and the events() iterator)."""
from __future__ import annotations

import asyncio
import threading
import unittest
from typing import Any, List

import _support
from _support import FakeKeywarden
from keywarden import AsyncClient, BeatEvent, ErrorCode, KeywardenError


class AsyncClientTests(unittest.IsolatedAsyncioTestCase):
    async def test_calls_and_heartbeat_events_on_the_loop(self) -> None:
        fake = FakeKeywarden()
        c = AsyncClient.from_config(fake.config(), transport=fake)
        app = await c.init()
        self.assertEqual(app.name, "Fake App")
        self.assertEqual(c.session, app.session)
        lic = await c.activate_license("KEY-GOOD-0001", "hwid-aaaaaaaa")
        self.assertEqual(lic.level, 3)

        loop_thread = threading.get_ident()
        plain_calls: List[int] = []
        async_calls: List[int] = []

        async def on_beat_async(b: BeatEvent) -> None:
            async_calls.append(b.index)

        hb = await c.start_heartbeat("system-id-0001", "abcdef0123456789", interval=0.01, debugger_detected=lambda: False,
                                     on_beat=lambda b: plain_calls.append(threading.get_ident()))
        hb.on("beat", on_beat_async)
        seen: List[Any] = []
        async for name, event in hb.events():
            seen.append((name, event))
            if name == "beat" and event.count == 3:
                await hb.stop()
        names = [n for n, _ in seen]
        self.assertEqual(names[:3], ["beat", "beat", "beat"])
        self.assertEqual(names[-1], "stopped")
        self.assertEqual(seen[-1][1].reason, "stop")
        self.assertTrue(plain_calls and all(t == loop_thread for t in plain_calls), "listeners run on the loop's thread")
        await asyncio.sleep(0)  # let the coroutine listeners' tasks finish
        self.assertEqual(async_calls[:3], [1, 2, 3])
        self.assertFalse(hb.running)
        self.assertEqual(len(fake.stopped), 1)

    async def test_errors_are_typed(self) -> None:
        fake = FakeKeywarden()
        c = AsyncClient.from_config(fake.config(), transport=fake)
        await c.init()
        with self.assertRaises(KeywardenError) as cm:
            await c.activate_license("NOPE", "hwid-aaaaaaaa")
        self.assertIs(cm.exception.code, ErrorCode.INVALID_KEY)

    async def test_register_and_login(self) -> None:
        fake = FakeKeywarden()
        c = AsyncClient.from_config(fake.config(), transport=fake)
        await c.init()
        self.assertEqual((await c.register("ann", "pass-1234", "KEY-GOOD-0001", "hwid-aaaaaaaa")).username, "ann")
        self.assertEqual((await c.login("ann", "pass-1234", "hwid-aaaaaaaa")).level, 3)
        self.assertEqual(fake.paths(), ["init", "register", "login", "login"])

    async def test_a_kill_ends_wait(self) -> None:
        fake = FakeKeywarden()
        c = AsyncClient.from_config(fake.config(), transport=fake)
        await c.init()
        await c.activate_license("KEY-GOOD-0001", "hwid-aaaaaaaa")
        killed: List[Any] = []
        hb = await c.start_heartbeat("system-id-0001", "abcdef0123456789", interval=0.01, debugger_detected=lambda: True, on_killed=killed.append)
        await asyncio.wait_for(hb.wait(), 5)
        self.assertIs(killed[0].error.code, ErrorCode.HEARTBEAT_KILLED)


if __name__ == "__main__":
    unittest.main()
