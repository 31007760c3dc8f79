-- +goose Up
-- TIMESTAMP ends on 2038-01-19; after that, writing updated_at fails, and
-- with it every reservation and lease. DATETIME(3) reaches year 9999.
ALTER TABLE id_sequence MODIFY updated_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3);
ALTER TABLE worker_node MODIFY updated_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3);

-- +goose Down
ALTER TABLE id_sequence MODIFY updated_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3);
ALTER TABLE worker_node MODIFY updated_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3);
