"""omrd through a gRPC client this project did not write: Python grpcio, stubs generated from
proto/omr/v1/detector.proto by grpcio-tools, reflection through grpcio-reflection.

It registers a recipient's detection key (made by `omr keygen`) in 1 MiB chunks, has `omr send`
post messages to it and to a stranger, waits with WatchKeyStatus until the key has covered them,
fetches the digest over gRPC and over HTTP and checks the two are byte for byte the same, checks
that `omr digest` decodes exactly the recipient's messages from it, that errors carry
`omr-error-code` (an oversized unary request included), and that reflection answers v1 and
v1alpha clients, an unknown symbol with an error answer on a stream that goes on.

Prints the key id and access token as JSON on stdout (run.sh gives them to the property-based
contract test); everything else goes to stderr. Exits non-zero on the first mismatch.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import grpc
import requests
from grpc_tools import protoc
from grpc_reflection.v1alpha import reflection_pb2
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

CHUNK = 1 << 20


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def check(condition, what):
    if not condition:
        raise SystemExit(f"FAILED: {what}")
    log(f"ok: {what}")


def stubs(proto_root):
    """Generate the Python stubs of the proto into a temporary directory and import them."""
    out = tempfile.mkdtemp(prefix="omr-stubs-")
    rc = protoc.main(
        [
            "grpc_tools.protoc",
            f"-I{proto_root}",
            f"--python_out={out}",
            f"--grpc_python_out={out}",
            "omr/v1/detector.proto",
        ]
    )
    if rc != 0:
        raise SystemExit(f"protoc failed ({rc})")
    sys.path.insert(0, out)
    from omr.v1 import detector_pb2, detector_pb2_grpc  # noqa: E402

    return detector_pb2, detector_pb2_grpc


def error_code(err):
    """The omr-error-code of a failed call."""
    return dict(err.trailing_metadata() or ()).get("omr-error-code")


def expect_error(call, status, code, what):
    try:
        call()
    except grpc.RpcError as err:
        check(
            err.code() == status and error_code(err) == code,
            f"{what}: {err.code().name} {error_code(err)} (want {status.name} {code})",
        )
        return
    raise SystemExit(f"FAILED: {what}: the call succeeded")


def omr(binary, *args):
    done = subprocess.run([binary, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"FAILED: omr {' '.join(args)}: {done.stderr}")
    return done.stdout


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--omr", required=True, help="the omr CLI binary")
    p.add_argument("--http", required=True, help="omrd's HTTP base URL")
    p.add_argument("--grpc", required=True, help="omrd's gRPC address, host:port")
    p.add_argument("--proto", required=True, help="the directory holding omr/v1/detector.proto")
    p.add_argument("--param-set", required=True)
    p.add_argument("--work", required=True, help="a directory for key directories")
    a = p.parse_args()
    pb, pb_grpc = stubs(a.proto)
    channel = grpc.insecure_channel(
        a.grpc,
        options=[("grpc.max_send_message_length", 8 << 20)],
    )
    detector = pb_grpc.DetectorStub(channel)

    params = detector.GetParams(pb.GetParamsRequest())
    check(params.param_set == a.param_set, f"GetParams names {params.param_set}")

    # A recipient and a stranger, made by the project's own CLI.
    servers = ["--http", a.http, "--grpc", f"http://{a.grpc}"]
    dirs = {}
    for name in ("alice", "stranger"):
        dirs[name] = os.path.join(a.work, name)
        omr(
            a.omr, "keygen", "--out", dirs[name], "--param-set", a.param_set,
            "--allow-insecure-params", "--kbar", "4",
        )
    with open(os.path.join(dirs["alice"], "detection.key"), "rb") as f:
        key = f.read()

    def upload():
        yield pb.RegisterDetectionKeyRequest(
            header=pb.RegistrationHeader(
                param_set=a.param_set, kbar=4, total_bytes=len(key), start_index=0
            )
        )
        for at in range(0, len(key), CHUNK):
            yield pb.RegisterDetectionKeyRequest(chunk=key[at : at + CHUNK])

    reg = detector.RegisterDetectionKey(upload())
    check(len(reg.access_token) == 64, f"registered key {reg.key_id} in 1 MiB chunks")
    auth = [("authorization", f"Bearer {reg.access_token}")]

    # What `omr register` would have written, so that `omr digest` can decode.
    with open(os.path.join(dirs["alice"], "registration.json"), "w") as f:
        json.dump(
            {
                "key_id": reg.key_id,
                "access_token": reg.access_token,
                "start_index": reg.start_index,
                "param_set": a.param_set,
                "kbar": 4,
                "grpc_url": f"http://{a.grpc}",
                "http_url": a.http,
                "registered_at": "2026-01-01T00:00:00Z",
            },
            f,
        )
    os.chmod(os.path.join(dirs["alice"], "registration.json"), 0o600)

    texts = [f"alice {i}" for i in range(3)]
    for i, text in enumerate(texts):
        omr(a.omr, "send", "--to", os.path.join(dirs["alice"], "address"), "--message", text, *servers)
        omr(a.omr, "send", "--to", os.path.join(dirs["stranger"], "address"),
            "--message", f"other {i}", *servers)

    # Two more for the stranger close the first attachment epoch (8 messages at the test's
    # epoch_len), which the property-based test then fetches from.
    for i in (3, 4):
        omr(a.omr, "send", "--to", os.path.join(dirs["stranger"], "address"),
            "--message", f"other {i}", *servers)

    # WatchKeyStatus until the key has covered all eight messages.
    deadline = time.monotonic() + 120
    status = None
    for status in detector.WatchKeyStatus(
        pb.WatchKeyStatusRequest(key_id=reg.key_id), metadata=auth, timeout=120
    ):
        if status.cursor >= 8 or time.monotonic() > deadline:
            break
    check(status is not None and status.cursor >= 8, f"WatchKeyStatus reached cursor {status.cursor}")
    check(status.param_set == a.param_set and status.key_id == reg.key_id, "status names the key")

    # The digest over gRPC (header, then chunks) and over HTTP: the same bytes.
    header, chunks = None, []
    for part in detector.GetDigest(pb.GetDigestRequest(key_id=reg.key_id), metadata=auth):
        if part.HasField("header"):
            header = part.header
        else:
            chunks.append(part.chunk)
    grpc_digest = b"".join(chunks)
    check(header is not None and header.total_bytes == len(grpc_digest), "gRPC digest complete")
    r = requests.get(
        f"{a.http}/v1/digests/{reg.key_id}",
        headers={"Authorization": f"bearer {reg.access_token}"},
        timeout=30,
    )
    check(r.status_code == 200, f"HTTP digest answered {r.status_code}")
    check(r.content == grpc_digest, f"HTTP and gRPC digests identical ({len(grpc_digest)} bytes)")
    check(
        (int(r.headers["omr-range-start"]), int(r.headers["omr-range-end"]))
        == (header.range_start, header.range_end),
        "HTTP range headers match the gRPC header",
    )

    # The project's CLI decodes exactly alice's three messages from that key's digest.
    out = omr(a.omr, "digest", "--keys", dirs["alice"], "--from", "0", "--json", *servers)
    messages = json.loads(out)["messages"]
    got = sorted(m["text"] for m in messages if m["opened"])
    check(got == texts and len(messages) == 3, f"omr digest decodes alice's messages: {got}")

    # Errors carry omr-error-code: a wrong token, an unknown key, an oversized unary request.
    expect_error(
        lambda: detector.GetKeyStatus(
            pb.GetKeyStatusRequest(key_id=reg.key_id),
            metadata=[("authorization", "Bearer " + "0" * 64)],
        ),
        grpc.StatusCode.PERMISSION_DENIED, "forbidden", "a wrong token",
    )
    expect_error(
        lambda: detector.GetKeyStatus(pb.GetKeyStatusRequest(key_id="nope"), metadata=auth),
        grpc.StatusCode.NOT_FOUND, "unknown_key", "an unknown key",
    )
    expect_error(
        lambda: detector.AnswerPirQuery(
            pb.AnswerPirQueryRequest(epoch=0, query=bytes(6 << 20))
        ),
        grpc.StatusCode.RESOURCE_EXHAUSTED, "body_too_large", "a 6 MiB unary request",
    )

    # Reflection: grpcio-reflection's descriptor database (v1alpha) ...
    db = ProtoReflectionDescriptorDatabase(channel)
    services = db.get_services()
    check("omr.v1.Detector" in services, f"v1alpha lists {services}")
    try:
        db.FindFileContainingSymbol("omr.v1.NoSuchThing")
        raise SystemExit("FAILED: an unknown symbol was found")
    except KeyError:
        log("ok: v1alpha: an unknown symbol is not found")
    found = db.FindFileContainingSymbol("omr.v1.Detector")
    check(found.package == "omr.v1", "v1alpha: the same stream goes on to find omr.v1.Detector")
    # ... and v1 (same messages on the wire; grpcio-reflection generates only v1alpha).
    v1 = channel.stream_stream(
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )
    asks = [
        reflection_pb2.ServerReflectionRequest(file_containing_symbol="omr.v1.NoSuchThing"),
        reflection_pb2.ServerReflectionRequest(list_services=""),
    ]
    answers = list(v1(iter(asks), timeout=30))
    check(len(answers) == 2, "v1: one answer per request")
    check(
        answers[0].WhichOneof("message_response") == "error_response"
        and answers[0].error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0],
        "v1: an unknown symbol is an error answer",
    )
    names = [s.name for s in answers[1].list_services_response.service]
    check("omr.v1.Detector" in names, f"v1 lists {names}")

    print(json.dumps({"key_id": reg.key_id, "access_token": reg.access_token}))


if __name__ == "__main__":
    main()
