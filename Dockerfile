# omrd (the detector service) and omr (the CLI) in one image.
#
#   docker build -t omrd .
#   docker run --rm -p 8080:8080 -p 50051:50051 -v omr-data:/var/lib/omr omrd
#
# Stages: `chef` (toolchain + cargo-chef), `planner` (dependency recipe from the manifests),
# `builder` (dependencies first, cached in their own layer; then the workspace), `runtime`
# (Debian slim, non-root). The dependency layer is rebuilt only when a Cargo.toml or Cargo.lock
# changes, not when sources do.
#
# Built and measured for x86-64 (linux/amd64). No target-cpu flags: tfhe picks its AVX2 or
# AVX-512 kernels at run time, so the image runs on any x86-64 host.

# The toolchain CI builds and tests with. The workspace needs rustc >= 1.91.1 (tfhe 1.8.2):
# --build-arg RUST_VERSION=1.91 works too. The builder and the runtime are both Debian bookworm,
# so the binaries find the glibc they were linked against.
ARG RUST_VERSION=1.95
ARG CARGO_CHEF_VERSION=0.1.77

FROM rust:${RUST_VERSION}-bookworm AS chef
ARG CARGO_CHEF_VERSION
RUN cargo install cargo-chef --locked --version "${CARGO_CHEF_VERSION}"
WORKDIR /src

# The recipe lists every manifest and target of the workspace; it changes only with them.
FROM chef AS planner
COPY . .
RUN cargo chef prepare --recipe-path recipe.json

FROM chef AS builder
COPY --from=planner /src/recipe.json recipe.json
# Dependencies only (omr-proto's protoc is vendored, so no system protoc is needed). `cook`
# takes one --package at most and has no --locked (it builds from the recipe's Cargo.lock), so
# it cooks the whole workspace's dependencies.
RUN cargo chef cook --release --workspace --recipe-path recipe.json
# The workspace: sources, proto/ (omr-proto's build.rs) and migrations/ (embedded by
# omr-store with sqlx::migrate!).
COPY . .
# The image's binaries lose their debug info (`strip --strip-debug`: 155 MB → ≈ 30 MB each)
# but keep their symbols, so a panic's backtrace still names the functions; file and line
# numbers need a local build (the workspace's release profile keeps line tables).
RUN cargo build --release --locked -p omr-server -p omr-cli \
 && install -D -m 0755 -t /out target/release/omrd target/release/omr \
 && strip --strip-debug /out/omrd /out/omr

FROM debian:bookworm-slim AS runtime
# ca-certificates for TLS to a managed PostgreSQL or collector; curl for the health check.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/*
# A fixed uid/gid so volumes and Kubernetes securityContext can name it.
RUN groupadd --system --gid 10001 omr \
 && useradd --system --uid 10001 --gid omr --home-dir /var/lib/omr --no-create-home \
      --shell /usr/sbin/nologin omr \
 && install -d -o omr -g omr -m 0750 /var/lib/omr
COPY --from=builder /out/omrd /out/omr /usr/local/bin/
# Container defaults: listen on all interfaces, data under /var/lib/omr, JSON logs. OMR_*
# variables override this file (docker-compose.yml sets OMR_DATABASE_URL); Kubernetes mounts
# its own omrd.toml over it (deploy/configmap.yaml).
COPY config/omrd-container.toml /etc/omr/omrd.toml

USER 10001:10001
WORKDIR /var/lib/omr
VOLUME ["/var/lib/omr"]
# HTTP (board, digests, probes, metrics) and gRPC (key registry).
EXPOSE 8080 50051
# /readyz: 200 once the store is reachable and both servers listen; 503 while shutting down.
# Over HTTPS when tls_cert / tls_key are set (a plain request then gets 400 tls_required); the
# certificate is omrd's own, so it is not verified here.
HEALTHCHECK --interval=15s --timeout=3s --start-period=60s --retries=3 \
  CMD ["sh", "-c", "curl -fsS -o /dev/null http://127.0.0.1:8080/readyz || curl -fsSk -o /dev/null https://127.0.0.1:8080/readyz"]
# omrd handles SIGTERM itself (readiness 503, drain, commit what is queued, close the store);
# give it shutdown_timeout_secs (30 s) plus a margin: `docker stop -t 40`, compose
# stop_grace_period, Kubernetes terminationGracePeriodSeconds.
STOPSIGNAL SIGTERM
# No ENTRYPOINT, so `docker run IMAGE omr --help` runs the CLI.
CMD ["omrd", "--config", "/etc/omr/omrd.toml"]
