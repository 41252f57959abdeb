"""omr-light-v1 from Python against a real omrd: keys made in Python, registered, a message
sent to the address text, followed and retrieved with its payload byte-exact within seconds of
its post; key directories shared with the `omr` command line both ways; a follow cancelled; a
retrieval cancelled and made again returns each message once."""

from __future__ import annotations

import asyncio
import os

import omr
import pytest

from conftest import client_for, omr_cli, retrieve_until


def run(coro):
    return asyncio.run(coro)


def test_keys_generated_in_python_receive_a_sealed_payload(light, tmp_path):
    async def main():
        client = client_for(light)
        keys = await omr.generate_keys(str(tmp_path / "alice"), "omr-light-v1")
        assert keys.param_set() == "omr-light-v1"
        seen = []

        class Progress(omr.UploadProgress):
            def on_progress(self, sent, total):
                seen.append((sent, total))

        reg = await client.register(keys, progress=Progress())
        assert reg.param_set == "omr-light-v1"
        assert seen and seen[-1][0] == seen[-1][1] == len(keys.detection_key())
        assert keys.registration().key_id == reg.key_id

        payload = os.urandom(200)  # any bytes, within the sealed payload's room
        index = await client.send(keys.address(), payload)
        [m] = await retrieve_until(client, keys, 1, timeout=20)
        assert (m.index, m.payload, m.sealed, m.opened) == (index, payload, True, True)
        # Nothing new a second time.
        again = await client.retrieve(keys)
        assert again.messages == [] and again.pending_payloads == []

        status = await client.status(keys)
        assert status.key_id == reg.key_id and status.param_set == "omr-light-v1"

    run(main())


def test_key_directories_are_shared_with_the_command_line(light, tmp_path):
    async def main():
        # Made by `omr keygen`, read from Python; the address text is `omr address`'s.
        cli_dir = tmp_path / "made-by-cli"
        omr_cli("keygen", "--out", str(cli_dir), "--param-set", "omr-light-v1", "--json")
        from_cli = omr.KeyDirectory.open(str(cli_dir))
        assert from_cli.address() == omr_cli("address", "--keys", str(cli_dir)).strip()
        assert omr.Address.parse(from_cli.address()).text() == from_cli.address()
        # Made by Python, read by `omr`: the same address, and `omr digest` reads what Python
        # sent to it once Python registered it.
        py_dir = tmp_path / "made-by-python"
        keys = await omr.generate_keys(str(py_dir), "omr-light-v1")
        assert omr_cli("address", "--keys", str(py_dir)).strip() == keys.address()
        client = client_for(light)
        await client.register(keys)
        index = await client.send(keys.address(), b"to the command line")
        deadline = asyncio.get_running_loop().time() + 20
        while True:
            out = omr_cli("digest", "--keys", str(py_dir), "--http", light.http, "--grpc",
                          light.grpc, "--json")
            import json

            texts = [(m["index"], m["text"]) for m in json.loads(out)["messages"]]
            if texts:
                assert texts == [(index, "to the command line")]
                break
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.3)

    run(main())


def test_follow_announces_a_message_with_its_payload_and_stops_when_left(light, tmp_path):
    async def follow_two():
        client = client_for(light)
        keys = await omr.generate_keys(str(tmp_path / "bob"), "omr-light-v1")
        await client.register(keys)
        got = []

        async def sender():
            await asyncio.sleep(0.5)
            for text in (b"one", b"two"):
                await client.send(keys.address(), text)

        send = asyncio.create_task(sender())
        async with asyncio.timeout(30):
            async for inbox in omr.follow(client, keys):
                got.extend(m.payload for m in inbox.messages)
                if len(got) >= 2:
                    break
        await send
        assert got == [b"one", b"two"]
        # Left: a message sent now is there for the next retrieval (the follow took nothing).
        index = await client.send(keys.address(), b"three")
        [m] = await retrieve_until(client, keys, 1, timeout=20)
        assert (m.index, m.payload) == (index, b"three")

    run(follow_two())


def test_a_cancelled_follow_stops_and_takes_nothing(light, tmp_path):
    async def main():
        client = client_for(light)
        keys = await omr.generate_keys(str(tmp_path / "alice"), "omr-light-v1")
        await client.register(keys)
        heard = []

        class Listener(omr.InboxListener):
            def on_inbox(self, inbox):
                heard.append(inbox)
                return True

        task = asyncio.create_task(client.follow(keys, Listener()))
        await asyncio.sleep(1.5)  # let it run a round or two; there is nothing to hear
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert heard == []
        # After the cancel the message is the next retrieval's: the follow is gone.
        index = await client.send(keys.address(), b"after the cancel")
        while (await client.status(keys)).cursor <= index:
            await asyncio.sleep(0.1)
        [m] = await retrieve_until(client, keys, 1, timeout=20)
        assert (m.index, m.payload) == (index, b"after the cancel")
        assert heard == []

    run(main())


@pytest.mark.xfail(
    strict=False,
    reason="known defect (docs/bindings.md, 'Exactly once'): a cancel that lands after the SDK "
    "finished the retrieval and saved the state drops its result, so those messages are lost",
)
def test_a_retrieval_interrupted_and_made_again_returns_each_message_once(light, tmp_path):
    async def main():
        client = client_for(light)
        keys = await omr.generate_keys(str(tmp_path / "alice"), "omr-light-v1")
        await client.register(keys)
        sent = [await client.send(keys.address(), f"m{i}".encode()) for i in range(3)]
        while (await client.status(keys)).cursor <= sent[-1]:
            await asyncio.sleep(0.1)
        # Cancelled at once, then after a moment: each leaves the state as it was or whole.
        for delay in (0, 0.001, 0.01):
            task = asyncio.create_task(client.retrieve(keys))
            await asyncio.sleep(delay)
            task.cancel()
            try:
                early = await task
            except asyncio.CancelledError:
                early = None
            if early is not None:  # it finished before the cancel: its messages count
                got = list(early.messages)
                break
        else:
            got = []
        got += await retrieve_until(client, keys, 3 - len(got), timeout=20) if len(got) < 3 else []
        assert [(m.index, m.payload) for m in got] == [(i, f"m{n}".encode()) for n, i in enumerate(sent)]
        assert (await client.retrieve(keys)).messages == []

    run(main())
