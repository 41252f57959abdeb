"""omr-light-v1 from Python against a real omrd: keys made in Python, registered, a message
sent to the address text, followed and retrieved with its payload byte-exact within seconds of
its post; key directories shared with the `omr` command line both ways; a follow cancelled;
commit on delivery: a retrieval cancelled at any moment loses nothing, and an inbox comes again
until it is acknowledged."""

from __future__ import annotations

import asyncio
import os

import omr
import pytest

from conftest import client_for, light_recipient, omr_cli, retrieve_until, until_detected


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
        client, keys = await light_recipient(light, tmp_path / "bob")
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
                    keys.acknowledge(inbox)  # leaving the loop does not acknowledge it
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
        client, keys = await light_recipient(light, tmp_path / "alice")
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
        await until_detected(client, keys, index)
        [m] = await retrieve_until(client, keys, 1, timeout=20)
        assert (m.index, m.payload) == (index, b"after the cancel")
        assert heard == []

    run(main())


def test_a_retrieval_cancelled_at_any_moment_loses_nothing(light, tmp_path):
    async def main():
        client, keys = await light_recipient(light, tmp_path / "alice")
        sent = [await client.send(keys.address(), f"m{i}".encode()) for i in range(3)]
        await until_detected(client, keys, sent[-1])
        want = [(i, f"m{n}".encode()) for n, i in enumerate(sent)]
        # Cancelled at once, in flight, and (the longer delays) after it finished but before
        # its result was taken: none moves the state, so none can lose a message.
        finished = 0
        for delay in (0, 0.001, 0.01, 0.05, 0.2, 1.0):
            task = asyncio.create_task(client.retrieve(keys))
            await asyncio.sleep(delay)
            task.cancel()
            try:
                await task
                finished += 1
            except asyncio.CancelledError:
                pass
        assert finished >= 1, "no retrieval finished within a second: the test proved nothing"
        inbox = await client.retrieve(keys)
        assert [(m.index, m.payload) for m in inbox.messages] == want
        keys.acknowledge(inbox)
        assert (await client.retrieve(keys)).messages == []

    run(main())


def test_an_inbox_comes_again_until_it_is_acknowledged(light, tmp_path):
    async def main():
        client, keys = await light_recipient(light, tmp_path / "alice")
        first = await client.send(keys.address(), b"first")
        await until_detected(client, keys, first)
        a = await client.retrieve(keys)
        assert [m.payload for m in a.messages] == [b"first"]
        # Not acknowledged: the same message again, and a later one with it.
        second = await client.send(keys.address(), b"second")
        await until_detected(client, keys, second)
        b = await client.retrieve(keys)
        assert [(m.index, m.payload) for m in b.messages] == [(first, b"first"), (second, b"second")]
        # b acknowledged first: a, retrieved from the same state, is refused and saves nothing.
        keys.acknowledge(b)
        keys.acknowledge(b)  # again: nothing to do
        with pytest.raises(omr.OmrError.Invalid) as e:
            keys.acknowledge(a)
        assert e.value.code == "stale_inbox"
        assert (await client.retrieve(keys)).messages == []
        # A receipt that no retrieval made.
        with pytest.raises(omr.OmrError.Invalid) as e:
            keys.acknowledge(omr.Inbox(**{**vars(b), "receipt": b"{}"}))
        assert e.value.code == "bad_receipt"
        # What the command line reads: the acknowledged state (omr digest finds nothing new).
        out = omr_cli("digest", "--keys", str(tmp_path / "alice"), "--http", light.http,
                      "--grpc", light.grpc, "--json")
        import json

        assert json.loads(out)["messages"] == []

    run(main())
