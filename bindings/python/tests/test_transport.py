"""The client's transport from Python: TLS with a custom root (a self-signed certificate made
here with openssl; without the root the call fails with code `tls`), and postage (a server that
asks for stamps: `send` solves one and the message arrives)."""

from __future__ import annotations

import asyncio
import subprocess

import omr
import pytest

from conftest import client_for, retrieve_until


def self_signed(dir) -> tuple[str, str]:
    cert, key = dir / "cert.pem", dir / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=omrd",
         "-addext", "subjectAltName=IP:127.0.0.1",
         # A server certificate, not a CA (webpki refuses a CA as the end entity).
         "-addext", "basicConstraints=critical,CA:FALSE", "-addext", "extendedKeyUsage=serverAuth"],
        check=True, capture_output=True,
    )
    return str(cert), str(key)


def test_tls_with_a_custom_root(omrd_factory, tmp_path):
    cert, key = self_signed(tmp_path)
    server = omrd_factory(OMR_PARAM_SET="omr-light-v1", OMR_TLS_CERT=cert, OMR_TLS_KEY=key)
    assert server.http.startswith("https://")

    async def main():
        keys = await omr.generate_keys(str(tmp_path / "alice"), "omr-light-v1")
        untrusting = omr.Client(omr.ClientConfig(http_url=server.http, grpc_url=server.grpc,
                                                 retries=0))
        with pytest.raises(omr.OmrError.Unavailable) as e:
            await untrusting.send(keys.address(), b"x")
        assert e.value.code == "tls" and not e.value.retryable
        pem = open(cert).read()
        client = omr.Client(omr.ClientConfig(http_url=server.http, grpc_url=server.grpc,
                                             ca_cert_pem=pem))
        await client.register(keys)
        index = await client.send(keys.address(), b"over TLS")
        [m] = await retrieve_until(client, keys, 1, timeout=20)
        assert (m.index, m.payload) == (index, b"over TLS")
        assert (await client.status(keys)).key_id == keys.registration().key_id

    asyncio.run(main())


def test_send_stamps_when_the_server_asks_for_postage(omrd_factory, tmp_path):
    server = omrd_factory(OMR_PARAM_SET="omr-light-v1", OMR_POSTAGE_BITS="12")
    assert server.params()["postage_bits"] == 12

    async def main():
        client = client_for(server)
        keys = await omr.generate_keys(str(tmp_path / "alice"), "omr-light-v1")
        await client.register(keys)
        index = await client.send(keys.address(), b"stamped")
        [m] = await retrieve_until(client, keys, 1, timeout=20)
        assert (m.index, m.payload) == (index, b"stamped")

    asyncio.run(main())
