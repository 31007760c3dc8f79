#!/usr/bin/env bash
# .ci/orders-image.sh [TAG]: build the image TAG (default idgen-orders:ci)
# of examples/orders without a registry (see .ci/scratch-image.sh). Like
# the real image it runs as the non-root user 65532 on 0.0.0.0:8081 with
# the SQLite default in /data. deploy/orders_compose_test.go runs it as
# ORDERS_IMAGE in examples/orders/docker-compose.yml, under a tag of each
# run's own. Prints TAG on stdout. Needs go and a Docker engine.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/scratch-image.sh"
scratch_image "${1:-idgen-orders:ci}" org.idgen.orders-ci-image ./examples/orders orders <<'DOCKERFILE'
FROM scratch
COPY orders /orders
COPY --chown=65532:65532 data /data
ENV ORDERS_STORE=sqlite:///data/orders.db
ENV ORDERS_ADDR=0.0.0.0:8081
USER 65532:65532
EXPOSE 8081
ENTRYPOINT ["/orders"]
DOCKERFILE
