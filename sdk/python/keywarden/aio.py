"""asyncio front of the client: the same calls, awaited.

Each call runs the synchronous client in an executor (``loop.run_in_executor``), so the event
loop never blocks on the network and both clients share one implementation of the security
rules. Cancelling an awaiting task abandons the result; the call itself still ends by its own
timeout. Heartbeat events are delivered on the event loop: listeners may be plain functions or
coroutine functions, and :meth:`AsyncHeartbeat.events` is an async iterator over them.
"""
from __future__ import annotations

import asyncio
import collections
import functools
import os
from concurrent.futures import Executor
from typing import Any, AsyncIterator, Callable, Deque, Dict, List, Mapping, Optional, Set, Tuple, TypeVar, Union

from datetime import datetime

from .client import AppInfo, Client, LicenseInfo, OptionsArg, TrialInfo, UserInfo
from .config import Config
from .heartbeat import EVENTS, Heartbeat
from .offline import OfflineLicense
from .updates import Artifact, ProgressCallback, UpdateOffer

__all__ = ["AsyncClient", "AsyncHeartbeat"]

T = TypeVar("T")
AsyncListener = Callable[[Any], Any]
# Events kept for events() when nobody reads them (oldest dropped first): a program that only
# uses listeners must not grow memory with every beat.
_BUFFERED_EVENTS = 1024


class AsyncHeartbeat:
    """The asyncio view of a :class:`Heartbeat` (which beats on its own thread)."""

    def __init__(self, heartbeat: Heartbeat, loop: asyncio.AbstractEventLoop, executor: Optional[Executor]) -> None:
        self.heartbeat = heartbeat
        self._loop = loop
        self._executor = executor
        self._listeners: Dict[str, List[AsyncListener]] = {name: [] for name in EVENTS}
        self._buffer: Deque[Tuple[str, Any]] = collections.deque(maxlen=_BUFFERED_EVENTS)
        self._arrived = asyncio.Event()
        self._stopped = asyncio.Event()
        self._tasks: Set["asyncio.Future[Any]"] = set()
        for name in EVENTS:
            heartbeat.on(name, functools.partial(self._from_thread, name))

    @property
    def beat_interval(self) -> int:
        return self.heartbeat.beat_interval

    @property
    def beat_count(self) -> int:
        return self.heartbeat.beat_count

    @property
    def running(self) -> bool:
        return self.heartbeat.running

    @property
    def state(self) -> str:
        return self.heartbeat.state

    @property
    def last_beat_at(self) -> Any:
        return self.heartbeat.last_beat_at

    def on(self, event: str, listener: AsyncListener) -> Callable[[], None]:
        """Adds a listener (function or coroutine function) called on the event loop."""
        if event not in self._listeners:
            raise ValueError(f"unknown heartbeat event {event!r} (one of {', '.join(EVENTS)})")
        self._listeners[event].append(listener)
        return lambda: self._listeners[event].remove(listener) if listener in self._listeners[event] else None

    async def stop(self) -> None:
        """Stops beating and closes the heartbeat session on the server. Never raises."""
        await self._loop.run_in_executor(self._executor, self.heartbeat.stop)
        await self._stopped.wait()

    async def wait(self) -> None:
        """Until the heartbeat has stopped (stop() or a kill)."""
        await self._stopped.wait()

    async def events(self) -> AsyncIterator[Tuple[str, Any]]:
        """Yields ``(name, event)`` pairs in order, ending after ``stopped``. One reader at a time.
        Every event but ``channel`` (subscribe to that one with :meth:`on`)."""
        while True:
            while self._buffer:
                name, event = self._buffer.popleft()
                yield name, event
                if name == "stopped":
                    return
            self._arrived.clear()
            await self._arrived.wait()

    def _from_thread(self, name: str, event: Any) -> None:
        try:
            self._loop.call_soon_threadsafe(self._deliver, name, event)
        except RuntimeError:
            pass  # the loop is closed: nobody is listening any more

    def _deliver(self, name: str, event: Any) -> None:
        # "channel" (the realtime channel opened or closed) is a transport detail: on() only.
        if name != "channel":
            self._buffer.append((name, event))
            self._arrived.set()
        for cb in list(self._listeners[name]):
            try:
                result = cb(event)
                if asyncio.iscoroutine(result):
                    task = asyncio.ensure_future(result)
                    self._tasks.add(task)
                    task.add_done_callback(self._task_done)
            except Exception as e:  # noqa: BLE001 - a listener must not break delivery
                self.heartbeat.client.log.error("keywarden.heartbeat.listener_raised: %s: %r", name, e)
        if name == "stopped":
            self._stopped.set()

    def _task_done(self, task: "asyncio.Future[Any]") -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.heartbeat.client.log.error("keywarden.heartbeat.listener_raised: %r", task.exception())


class AsyncClient:
    """asyncio client: ``await client.init()`` and so on. Wraps a synchronous :class:`Client`
    (available as ``.client``); options are the same."""

    def __init__(
        self,
        config: Union[Client, Config, Mapping[str, Any]],
        options: OptionsArg = None,
        *,
        executor: Optional[Executor] = None,
        **kwargs: Any,
    ) -> None:
        self.client: Client = config if isinstance(config, Client) else Client(config, options, **kwargs)
        self._executor = executor

    @classmethod
    def from_config(
        cls,
        config: Union[Config, Mapping[str, Any], str, "os.PathLike[str]"],
        options: OptionsArg = None,
        *,
        executor: Optional[Executor] = None,
        **kwargs: Any,
    ) -> "AsyncClient":
        return cls(Client.from_config(config, options, **kwargs), executor=executor)

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    @property
    def session(self) -> Optional[str]:
        return self.client.session

    @property
    def clock_offset(self) -> Optional[float]:
        return self.client.clock_offset

    def machine_hwid(self) -> str:
        return self.client.machine_hwid()

    @staticmethod
    def self_hash(file: Optional[str] = None) -> str:
        return Client.self_hash(file)

    async def init(
        self, binary_hash: Optional[str] = None, binary_token: Optional[str] = None, binary_token_hash: Optional[str] = None
    ) -> AppInfo:
        return await self._run(self.client.init, binary_hash, binary_token, binary_token_hash)

    async def register(self, username: str, password: str, license: str, hwid: Optional[str] = None) -> UserInfo:
        return await self._run(self.client.register, username, password, license, hwid)

    async def login(self, username: str, password: str, hwid: Optional[str] = None) -> UserInfo:
        return await self._run(self.client.login, username, password, hwid)

    async def activate_license(self, key: str, hwid: Optional[str] = None) -> LicenseInfo:
        return await self._run(self.client.activate_license, key, hwid)

    async def trial(self, hwid: Optional[str] = None) -> TrialInfo:
        return await self._run(self.client.trial, hwid)

    async def offline_file(self, hwid: Optional[str] = None) -> str:
        return await self._run(self.client.offline_file, hwid)

    async def load_offline(self, file: str, hwid: Optional[str] = None) -> OfflineLicense:
        """As :meth:`Client.load_offline` (it reads and writes the state file: an executor runs it)."""
        return await self._run(self.client.load_offline, file, hwid)

    async def check_update(
        self, version: str, channel: str = "stable", platform: str = "any", arch: str = "any"
    ) -> Optional[UpdateOffer]:
        return await self._run(self.client.check_update, version, channel, platform, arch)

    async def download_update(
        self, artifact: Artifact, target_path: "os.PathLike[str] | str", progress: Optional[ProgressCallback] = None
    ) -> str:
        """As :meth:`Client.download_update`; ``progress`` is called on the executor's thread."""
        return await self._run(self.client.download_update, artifact, target_path, progress)

    @property
    def entitlements(self) -> Tuple[str, ...]:
        return self.client.entitlements

    def has_entitlement(self, code: str) -> bool:
        return self.client.has_entitlement(code)

    @property
    def grace_until(self) -> Optional[datetime]:
        return self.client.grace_until

    def grace_active(self) -> bool:
        return self.client.grace_active()

    @property
    def expires_at(self) -> Optional[datetime]:
        return self.client.expires_at

    async def call(self, endpoint: str, body: Mapping[str, Any]) -> Dict[str, Any]:
        return await self._run(self.client.call, endpoint, body)

    async def start_heartbeat(
        self,
        system_id: Optional[str] = None,
        code_hash: Optional[str] = None,
        *,
        interval: Optional[float] = None,
        code_size: Optional[int] = None,
        debugger_detected: Optional[Callable[[], bool]] = None,
        reauth: Union[bool, Callable[[Client], None], None] = None,
        compromised_after: int = 5,
        on_beat: Optional[AsyncListener] = None,
        on_degraded: Optional[AsyncListener] = None,
        on_compromised: Optional[AsyncListener] = None,
        on_recovered: Optional[AsyncListener] = None,
        on_killed: Optional[AsyncListener] = None,
        on_stopped: Optional[AsyncListener] = None,
        on_offline: Optional[AsyncListener] = None,
        on_grace_expired: Optional[AsyncListener] = None,
        on_expired: Optional[AsyncListener] = None,
    ) -> AsyncHeartbeat:
        """As :meth:`Client.start_heartbeat`; a ``reauth`` callable runs on a worker thread and
        receives the synchronous client."""
        hb = await self._run(
            self.client.prepare_heartbeat, system_id, code_hash,
            interval=interval, code_size=code_size, debugger_detected=debugger_detected, reauth=reauth,
            compromised_after=compromised_after,
        )
        ahb = AsyncHeartbeat(hb, asyncio.get_running_loop(), self._executor)
        for event, cb in (
            ("beat", on_beat), ("degraded", on_degraded), ("compromised", on_compromised), ("recovered", on_recovered),
            ("killed", on_killed), ("stopped", on_stopped), ("offline", on_offline), ("grace_expired", on_grace_expired),
            ("expired", on_expired),
        ):
            if cb is not None:
                ahb.on(event, cb)
        hb.start()
        return ahb
