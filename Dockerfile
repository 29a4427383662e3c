# syntax=docker/dockerfile:1
#
# floodgate's container image: a static binary on distroless, run as
# UID 65532 (nonroot). The build context is the repository root:
#
#   docker build -t floodgate:dev --build-arg VERSION=$(git describe --tags --always) .
#   docker run --rm -p 8081:8081 -p 8080:8080 floodgate:dev
#
# Multi-platform: the builder runs on the build machine's platform and
# cross-compiles for each target (docker buildx build --platform
# linux/amd64,linux/arm64 ...), so no emulation is needed.
#
# deploy/dockerfile_test.go checks this file statically (no Docker engine on
# the dev machine) and deploy/dockerbuild_test.go runs its go build line
# against a copy of the build context that .dockerignore leaves.

FROM --platform=$BUILDPLATFORM golang:1.26-bookworm AS build
WORKDIR /src
# Modules first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
ARG TARGETOS
ARG TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags "-s -w -X main.version=$VERSION" -o /out/floodgate ./cmd/floodgate

# distroless/static: CA certificates (for rediss:// and TLS), tzdata and
# /etc/passwd with the nonroot user; no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/floodgate /floodgate
# Numeric, so Kubernetes' runAsNonRoot can verify it.
USER 65532:65532
# The binary's defaults listen on loopback only; in a container the ports
# must be reachable from outside it.
ENV FLOODGATE_GRPC_ADDR=0.0.0.0:8081 FLOODGATE_HTTP_ADDR=0.0.0.0:8080
# 8081: gRPC (floodgate.v1.RateLimiter, Envoy's ratelimit.v3, health,
# reflection). 8080: HTTP admin (/healthz, /readyz, /metrics, pprof).
EXPOSE 8081 8080
ENTRYPOINT ["/floodgate"]
CMD ["serve"]
