"""The TFHE lane from Python against a real omrd: with the fast insecure test parameters
(`insecure-test`, named as such: tests only; omrd and `generate_keys` refuse it unless told)
a sealed payload followed and retrieved byte-exact; with omr-v2 (whose payload has room for a
letter naming an attachment: insecure-test's 64 bytes do not) a payload and its attachment,
the attachment by PIR once its epoch (8 messages here) closes."""

from __future__ import annotations

import asyncio
import os

import omr
import pytest

from conftest import client_for

FAST = dict(
    OMR_PARAM_SET="insecure-test",
    OMR_ALLOW_INSECURE_PARAMS="true",
    OMR_EPOCH_LEN="8",
    OMR_DETECT_BATCH="4",
)


def test_a_payload_is_followed_and_retrieved_byte_exact(omrd_factory, tmp_path):
    server = omrd_factory(**FAST)

    async def main():
        client = client_for(server)
        keys = await omr.generate_keys(
            str(tmp_path / "alice"), "insecure-test", kbar=4, allow_insecure_params=True
        )
        reg = await client.register(keys)
        assert (reg.param_set, reg.kbar) == ("insecure-test", 4)
        room = omr.Address.parse(keys.address()).max_payload_bytes()
        letter = os.urandom(room)
        got = []

        async def follow():
            async for inbox in omr.follow(client, keys):
                got.extend(inbox.messages)
                if got:
                    keys.acknowledge(inbox)  # leaving the loop does not acknowledge it
                    return

        following = asyncio.create_task(follow())
        index = await client.send(keys.address(), letter)
        async with asyncio.timeout(60):
            await following
        [m] = got
        assert (m.index, m.payload, m.sealed, m.opened) == (index, letter, True, True)
        assert (await client.retrieve(keys)).messages == []

        # A wrong token: the digest is refused (the TFHE lane always asks for one).
        import json

        reg_file = tmp_path / "alice" / "registration.json"
        good = json.loads(reg_file.read_text())
        reg_file.write_text(json.dumps({**good, "access_token": "0" * len(good["access_token"])}))
        with pytest.raises(omr.OmrError.Refused) as e:
            await client.retrieve(keys)
        assert e.value.code == "forbidden"

    asyncio.run(main())


def test_a_payload_and_its_attachment_arrive_byte_exact(omrd_factory, tmp_path):
    server = omrd_factory(
        OMR_PARAM_SET="omr-v2", OMR_EPOCH_LEN="8", OMR_MAX_ATTACHMENT_BYTES="1024"
    )

    async def main():
        client = client_for(server)
        keys = await omr.generate_keys(str(tmp_path / "alice"), "omr-v2", kbar=16)
        await client.register(keys)
        letter, picture = b"see attached", os.urandom(700)
        index = await client.send(keys.address(), letter, attachment=picture)
        # Its epoch closes after 8 messages.
        fillers = [await client.send(keys.address(), f"filler {i}".encode()) for i in range(7)]
        # Retrieve until the 8 messages and the attachment came (the attachment comes by PIR in
        # the first call that sees its epoch closed: with the last messages or after them).
        got, attachments = [], []
        async with asyncio.timeout(120):
            while len(got) < 8 or not attachments:
                inbox = await client.retrieve(keys)
                got += inbox.messages
                attachments += [a for a in inbox.attachments if a.data is not None]
                keys.acknowledge(inbox)
                if not attachments:
                    assert inbox.pending_attachments == ([index] if got else [])
                    await asyncio.sleep(0.3)
        assert [(m.index, m.payload) for m in got] == [(index, letter)] + [
            (i, f"filler {n}".encode()) for n, i in enumerate(fillers)
        ]
        assert got[0].has_attachment and not any(m.has_attachment for m in got[1:])
        [a] = attachments
        assert (a.index, a.data, a.status) == (index, picture, "fetched")
        assert (await client.retrieve(keys)).pending_attachments == []

    asyncio.run(main())


def test_insecure_parameters_are_refused_unless_asked(tmp_path):
    async def main():
        with pytest.raises(omr.OmrError.Invalid) as e:
            await omr.generate_keys(str(tmp_path / "k"), "insecure-test")
        assert e.value.code == "insecure_params"
        with pytest.raises(omr.OmrError.Invalid) as e:
            await omr.generate_keys(str(tmp_path / "k"), "omr-v9")
        assert e.value.code == "bad_param_set"
        assert not (tmp_path / "k").exists()

    asyncio.run(main())
