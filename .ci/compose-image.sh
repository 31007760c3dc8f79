#!/usr/bin/env bash
# .ci/compose-image.sh [TAG]: build the image TAG (default idgen:ci) that
# .ci/compose.override.yml gives the idgen services, without a registry
# (see .ci/scratch-image.sh). Like the real image it runs as the non-root
# user 65532 and starts `idgen serve` with the SQLite default in /data, so
# that idgencontainer's tests can run it without a database (the compose
# stack sets PostgreSQL/MySQL instead). On a linux host of the engine's
# architecture it is the same build as internal/proctest's, so that CI
# compiles it once. Prints TAG on stdout. Needs go and a Docker engine.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/scratch-image.sh"
scratch_image "${1:-idgen:ci}" org.idgen.compose-ci-image ./cmd/idgen idgen <<'DOCKERFILE'
FROM scratch
COPY idgen /idgen
COPY --chown=65532:65532 data /data
ENV IDGEN_STORE=sqlite:///data/idgen.db
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/idgen"]
CMD ["serve"]
DOCKERFILE
