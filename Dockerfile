# syntax=docker/dockerfile:1
# Container images of fleetpulse: one build stage compiles both binaries, then one small
# runtime stage per binary:
#
#   docker build --target hub   -t ghcr.io/fleetpulse/fleetpulse-hub:0.1.0 .
#   docker build --target agent -t ghcr.io/fleetpulse/fleetpulse-agent:0.1.0 .
#
# The runtime base is distroless "cc" (glibc, libgcc, CA certificates, no shell, no package
# manager) in its nonroot variant (uid/gid 65532). Not fully static: the Lua engine (Luau,
# C++) and SQLite are compiled in through cc and want glibc's C++ runtime pieces; distroless
# cc carries exactly those. The Helm charts run these images with a read-only root
# filesystem as uid 65532.
#
# The project's development machines and CI have no container engine, so this file is not
# built there; keep it conventional (plain `cargo build --release --locked`).

ARG RUST_VERSION=1.95

FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin fleetpulse-hub --bin fleetpulse-agent \
 && mkdir -p /out \
 && cp target/release/fleetpulse-hub target/release/fleetpulse-agent /out/

FROM gcr.io/distroless/cc-debian12:nonroot AS hub
LABEL org.opencontainers.image.title="fleetpulse-hub" \
      org.opencontainers.image.description="fleetpulse hub: verifies signed heartbeats, keeps cluster health, fails ClusterSets over" \
      org.opencontainers.image.source="https://github.com/fleetpulse/fleetpulse" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/fleetpulse-hub /usr/local/bin/fleetpulse-hub
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["/usr/local/bin/fleetpulse-hub"]

FROM gcr.io/distroless/cc-debian12:nonroot AS agent
LABEL org.opencontainers.image.title="fleetpulse-agent" \
      org.opencontainers.image.description="fleetpulse agent: runs health checks in a managed cluster and pushes signed heartbeats to the hub" \
      org.opencontainers.image.source="https://github.com/fleetpulse/fleetpulse" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/fleetpulse-agent /usr/local/bin/fleetpulse-agent
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/fleetpulse-agent"]
