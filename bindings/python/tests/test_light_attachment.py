"""omr-light-v1 with attachments from Python: on a light server that takes attachments a
recipient near the head has a payload and its attachment at once, both read from the board's
pages (which carry every message's sealed attachment), byte-exact, in the open epoch."""

from __future__ import annotations

import asyncio
import os

import omr

from conftest import light_recipient


def test_a_light_payload_and_its_attachment_arrive_at_once_byte_exact(omrd_factory, tmp_path):
    server = omrd_factory(OMR_PARAM_SET="omr-light-v1", OMR_MAX_ATTACHMENT_BYTES="1024")

    async def main():
        client, keys = await light_recipient(server, tmp_path / "alice")
        stranger = await omr.generate_keys(str(tmp_path / "stranger"), "omr-light-v1")
        letter, picture = b"see attached", os.urandom(900)
        index = await client.send(keys.address(), letter, attachment=picture)
        await client.send(stranger.address(), b"not for alice", attachment=os.urandom(500))
        plain = await client.send(keys.address(), b"no attachment")
        got, attachments = [], []
        async with asyncio.timeout(30):
            while len(got) < 2:
                inbox = await client.retrieve(keys)
                got += inbox.messages
                attachments += inbox.attachments
                keys.acknowledge(inbox)
                await asyncio.sleep(0.2)
        assert [(m.index, m.payload, m.has_attachment) for m in got] == [
            (index, letter, True),
            (plain, b"no attachment", False),
        ]
        assert [(a.index, a.data, a.status) for a in attachments] == [(index, picture, "fetched")]
        again = await client.retrieve(keys)
        assert again.messages == [] and again.pending_payloads == []
        assert again.pending_attachments == [] and again.attachments == []

    asyncio.run(main())
