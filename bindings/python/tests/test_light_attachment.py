"""omr-light-v1 with attachments from Python: on a light server that takes attachments a
payload comes at once (read from the board's tail) and its attachment by PIR in its epoch's
round once the epoch closes (4,096 messages: the board is filled from Python), byte-exact."""

from __future__ import annotations

import asyncio
import os

import omr

from conftest import client_for

EPOCH = 4096  # omr-light-v1's epoch: one detection batch


def test_a_light_payload_and_its_attachment_arrive_byte_exact(omrd_factory, tmp_path):
    server = omrd_factory(OMR_PARAM_SET="omr-light-v1", OMR_MAX_ATTACHMENT_BYTES="1024")
    assert server.params()["epoch_len"] == EPOCH

    async def main():
        client = client_for(server)
        keys = await omr.generate_keys(str(tmp_path / "alice"), "omr-light-v1")
        stranger = await omr.generate_keys(str(tmp_path / "stranger"), "omr-light-v1")
        await client.register(keys)
        letter, picture = b"see attached", os.urandom(900)
        index = await client.send(keys.address(), letter, attachment=picture)
        # The payload at once; the attachment waits for its epoch to close.
        async with asyncio.timeout(30):
            while True:
                inbox = await client.retrieve(keys)
                keys.acknowledge(inbox)
                if inbox.messages:
                    break
                await asyncio.sleep(0.2)
        [m] = inbox.messages
        assert (m.index, m.payload, m.has_attachment) == (index, letter, True)
        assert inbox.pending_payloads == [] and inbox.pending_attachments == [index]
        assert [a.status for a in inbox.attachments] == [
            "waiting (it comes with its epoch's PIR round, in a retrieval once the epoch closes)"
        ]
        # Close the epoch: the rest of its 4,096 messages to someone else, 64 at a time.
        to = stranger.address()
        for start in range(index + 1, EPOCH, 64):
            prepared = await asyncio.gather(
                *(client.prepare(to, b"filler") for _ in range(start, min(EPOCH, start + 64)))
            )
            await asyncio.gather(*(client.post(p) for p in prepared))
        attachments = []
        async with asyncio.timeout(120):
            while not attachments:
                inbox = await client.retrieve(keys)
                assert inbox.messages == []  # its payload came before
                attachments += [a for a in inbox.attachments if a.data is not None]
                keys.acknowledge(inbox)
                if not attachments:
                    await asyncio.sleep(0.3)
        [a] = attachments
        assert (a.index, a.data, a.status) == (index, picture, "fetched")
        again = await client.retrieve(keys)
        assert again.messages == [] and again.pending_payloads == [] and again.pending_attachments == []

    asyncio.run(main())
