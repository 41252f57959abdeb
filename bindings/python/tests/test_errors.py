"""Refused calls raise omr.OmrError with the service's code, and store nothing: a wrong token,
an unknown key, a bad address text, a duplicate post, an invite a server does not take; and a
key directory that is not registered."""

from __future__ import annotations

import asyncio
import json

import omr
import pytest

from conftest import client_for


def test_errors_carry_their_codes_and_store_nothing(light, tmp_path):
    async def main():
        client = client_for(light)
        keys = await omr.generate_keys(str(tmp_path / "alice"), "omr-light-v1")

        # Not registered yet: said before anything is sent.
        with pytest.raises(omr.OmrError.Local) as e:
            await client.retrieve(keys)
        assert e.value.code == "not_registered"
        await client.register(keys)
        with pytest.raises(omr.OmrError.Local) as e:
            await client.register(keys)
        assert e.value.code == "already_registered"

        # A bad address text: refused here, nothing posted.
        head = light.params()["board_head"]
        bad = keys.address()[:-3] + ("AAA" if not keys.address().endswith("AAA") else "BBB")
        for text in ("omr1", "not an address", bad):
            with pytest.raises(omr.OmrError.Invalid) as e:
                await client.send(text, b"x")
            assert e.value.code == "bad_address" and not e.value.retryable
            with pytest.raises(omr.OmrError.Invalid):
                omr.Address.parse(text)
        # Too long to seal.
        room = omr.Address.parse(keys.address()).max_payload_bytes()
        with pytest.raises(omr.OmrError.Invalid) as e:
            await client.send(keys.address(), b"x" * (room + 1))
        assert e.value.code == "payload_too_large"
        # An attachment on a server that takes none.
        with pytest.raises(omr.OmrError.Refused) as e:
            await client.send(keys.address(), b"x", attachment=b"y")
        assert e.value.code == "no_attachments" or e.value.code == "attachment_too_large"
        assert light.params()["board_head"] == head

        # A duplicate post: the same prepared message twice is on the board once.
        message = await client.prepare(keys.address(), b"once")
        index = await client.post(message)
        with pytest.raises(omr.OmrError.Refused) as e:
            await client.post(message)
        assert e.value.code == "duplicate_message" and f"index {index}" in e.value.detail
        assert light.params()["board_head"] == head + 1

        # A wrong token: the server refuses it; the registration is kept. (A light recipient
        # this close to the head reads the public board itself: its retrieval needs no token.)
        reg_file = tmp_path / "alice" / "registration.json"
        good = json.loads(reg_file.read_text())
        reg_file.write_text(json.dumps({**good, "access_token": "0" * len(good["access_token"])}))
        with pytest.raises(omr.OmrError.Refused) as e:
            await client.status(keys)
        assert e.value.code == "forbidden" and not e.value.retryable, e.value
        reg_file.write_text(json.dumps(good))
        assert (await client.status(keys)).key_id == good["key_id"]

        # An unknown key: deleted on the server (delete forgets it here too), then asked for
        # with the old registration.
        await client.delete(keys)
        assert keys.registration() is None
        reg_file.write_text(json.dumps(good))
        with pytest.raises(omr.OmrError.Refused) as e:
            await client.status(keys)
        assert e.value.code == "unknown_key" and not e.value.retryable

    asyncio.run(main())


def test_an_invite_is_needed_where_the_server_asks_for_one(omrd_factory, tmp_path):
    server = omrd_factory(OMR_PARAM_SET="omr-light-v1", OMR_REGISTRATION="invite",
                          OMR_ADMIN_TOKEN="a" * 48)

    async def main():
        client = client_for(server)
        keys = await omr.generate_keys(str(tmp_path / "alice"), "omr-light-v1")
        with pytest.raises(omr.OmrError.Refused) as e:
            await client.register(keys)
        assert e.value.code == "invite"
        with pytest.raises(omr.OmrError.Invalid) as e:
            await client.register(keys, invite="not-a-code")
        assert e.value.code == "bad_invite"
        with pytest.raises(omr.OmrError.Refused) as e:
            await client.register(keys, invite="0" * 32)
        assert e.value.code == "invite"
        assert keys.registration() is None

    asyncio.run(main())


def test_an_unreachable_server_is_retryable(tmp_path):
    async def main():
        client = omr.Client(omr.ClientConfig(http_url="http://127.0.0.1:1",
                                             grpc_url="http://127.0.0.1:1", retries=0))
        keys = await omr.generate_keys(str(tmp_path / "alice"), "omr-light-v1")
        with pytest.raises(omr.OmrError.Unavailable) as e:
            await client.send(keys.address(), b"x")
        assert e.value.code == "unreachable" and e.value.retryable
        with pytest.raises(omr.OmrError.Invalid) as e:
            omr.Client(omr.ClientConfig(http_url="ftp://x", grpc_url="http://127.0.0.1:1"))
        assert e.value.code == "bad_url"

    asyncio.run(main())
