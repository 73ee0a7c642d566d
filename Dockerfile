# Container images of fleetpulse, one per binary, built by scripts/build-images.sh:
#
#   bash scripts/build-images.sh   # -> target/images/fleetpulse-{hub,agent}.oci.tar
#
# Every stage is COPY-only and FROM scratch, so buildah (or podman, or docker) builds it
# without running a container. The build context is the one the script assembles:
#
#   rootfs/            a distroless-style base from Debian packages: glibc, libgcc,
#                      libstdc++ (Luau is C++), CA certificates in
#                      /etc/ssl/certs/ca-certificates.crt, /etc/passwd with the non-root
#                      user 65532, an empty /tmp; no shell, no package manager
#   home/nonroot/      the user's home, owned by it
#   fleetpulse-hub     the release binaries (cargo build --release --locked)
#   fleetpulse-agent
#
# The Helm charts run these images as uid 65532 with a read-only root filesystem.

FROM scratch AS base
COPY rootfs/ /
COPY --chown=65532:65532 home/ /home/

FROM base AS hub
LABEL org.opencontainers.image.title="fleetpulse-hub" \
      org.opencontainers.image.description="fleetpulse hub: verifies signed heartbeats, keeps cluster health, fails ClusterSets over" \
      org.opencontainers.image.source="https://github.com/fleetpulse/fleetpulse" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY fleetpulse-hub /usr/local/bin/fleetpulse-hub
USER 65532:65532
WORKDIR /home/nonroot
EXPOSE 8443
ENTRYPOINT ["/usr/local/bin/fleetpulse-hub"]

FROM base AS agent
LABEL org.opencontainers.image.title="fleetpulse-agent" \
      org.opencontainers.image.description="fleetpulse agent: runs health checks in a managed cluster and pushes signed heartbeats to the hub" \
      org.opencontainers.image.source="https://github.com/fleetpulse/fleetpulse" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY fleetpulse-agent /usr/local/bin/fleetpulse-agent
USER 65532:65532
WORKDIR /home/nonroot
ENTRYPOINT ["/usr/local/bin/fleetpulse-agent"]
