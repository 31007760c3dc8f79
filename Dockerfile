# idgen container image: a static binary on a distroless base, run as the
# non-root user 65532. Build with `docker build -t idgen:local .` or through
# docker-compose.yml. docs/deploy.md describes the image.
#
# No `# syntax=` line: BuildKit would pull a frontend image for it, and the
# classic builder (DOCKER_BUILDKIT=0) must build this file too.

# ---- build: a static binary (the SQLite driver is pure Go, so no cgo) ----
FROM golang:1.26-bookworm AS build
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /idgen ./cmd/idgen \
	&& mkdir /data

# ---- runtime: no shell, no package manager, user nonroot (65532) ----
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /idgen /idgen
# The default store is an SQLite file in /data, writable by the runtime user.
# Set IDGEN_STORE=postgres://… or mysql://… to share a database instead.
COPY --from=build --chown=65532:65532 /data /data
ENV IDGEN_STORE=sqlite:///data/idgen.db
VOLUME /data
USER 65532:65532
EXPOSE 8080
# /readyz answers 200 only while the store answers. The image has no curl:
# the binary checks it itself and exits 0 (healthy) or 1.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
	CMD ["/idgen", "health", "--url", "http://127.0.0.1:8080/readyz"]
# SIGTERM (docker stop, Kubernetes) drains requests and hands back the
# unused rest of each range; --shutdown-timeout (10s) bounds it.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/idgen"]
CMD ["serve"]
