"""Oblivious Message Retrieval: send to and retrieve from an omrd detector service.

The classes and functions are those of the project's Rust SDK (``omr-client``), through
UniFFI (``crates/omr-ffi``): nothing of the scheme or the protocol is written in Python.
Every network call is a coroutine that runs on the SDK's own threads; cancelling it
(``task.cancel()``) stops it.

Five lines, a recipient and a sender::

    import asyncio, omr
    async def main():
        client = omr.Client(omr.ClientConfig(http_url="http://127.0.0.1:8080", grpc_url="http://127.0.0.1:50051"))
        keys = await omr.generate_keys("alice", "omr-light-v1")   # as `omr keygen --out alice`
        await client.register(keys)                               # uploads its detection key
        await client.send(keys.address(), b"hello")               # sealed to alice's address
        print((await client.retrieve(keys)).messages)             # once detected: [ReceivedMessage(payload=b'hello', ...)]
    asyncio.run(main())

Errors are :class:`OmrError` (variants ``Refused``, ``Unavailable``, ``Invalid``, ``Local``),
each with ``code`` (the service's error code, e.g. ``rate_limited``, ``duplicate_message``,
``unknown_key``), ``detail`` and ``retryable``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import AsyncIterator

from ._native import *  # noqa: F401,F403  (the generated module: Client, KeyDirectory, ...)
from ._native import Client, Inbox, InboxListener, KeyDirectory, OmrError

__all__ = [name for name in dir() if not name.startswith("_")]


class _QueueListener(InboxListener):
    """Hands each inbox to an asyncio queue on the caller's event loop, and returns (so that
    the SDK acknowledges it) only when the consumer comes back for the next one."""

    def __init__(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue):
        self._loop = loop
        self._queue = queue
        self._lock = threading.Lock()
        self._closed = False
        self._handed: concurrent.futures.Future | None = None

    def on_inbox(self, inbox: Inbox) -> bool:
        with self._lock:
            if self._closed:
                raise _stopped()
            handed = self._handed = concurrent.futures.Future()
        self._loop.call_soon_threadsafe(self._queue.put_nowait, inbox)
        if not handed.result():  # the SDK's thread waits; the GIL is released meanwhile
            raise _stopped()
        return True

    def kept(self) -> None:
        """The consumer asked for the next inbox: the last one is kept."""
        with self._lock:
            if self._handed is not None and not self._handed.done():
                self._handed.set_result(True)

    def close(self) -> None:
        """The consumer left: the inbox it holds, if any, is not acknowledged."""
        with self._lock:
            self._closed = True
            if self._handed is not None and not self._handed.done():
                self._handed.set_result(False)


def _stopped() -> OmrError:
    return OmrError.Local(code="follow_stopped", detail="the follower left", retryable=False)


async def follow(client: Client, keys: KeyDirectory) -> AsyncIterator[Inbox]:
    """Follow ``keys`` as an async iterator: each :class:`Inbox` with something new, as the
    server detects it (:meth:`Client.follow` with a listener)::

        async for inbox in omr.follow(client, keys):
            for m in inbox.messages:
                print(m.index, m.payload)

    Each inbox is acknowledged when the loop comes back for the next one. Leaving the loop
    (``break``, an exception, cancellation) stops following and does not acknowledge the
    inbox in hand: call ``keys.acknowledge(inbox)`` before ``break`` if it was kept, or the
    next retrieval returns it again.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    listener = _QueueListener(loop, queue)
    task = loop.create_task(client.follow(keys, listener))
    try:
        while True:
            getter = loop.create_task(queue.get())
            done, _ = await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                yield getter.result()
                listener.kept()
                continue
            getter.cancel()
            task.result()  # raises the follow's error
            return
    finally:
        listener.close()
        task.cancel()
        try:
            await task
        except (asyncio.CancelledError, Exception):
            pass


__all__.append("follow")
