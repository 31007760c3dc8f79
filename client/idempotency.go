package client

import (
	"context"
	"fmt"
	"net/http"

	"github.com/idgen/idgen/idempotency"
)

type keyCtx struct{}

// WithIdempotencyKey returns a context whose Next, NextN, Snowflake and
// SnowflakeN calls send key as their Idempotency-Key: the first call
// with a key allocates, and every call with it after, from this process
// or any other, and the client's own retries, get the same IDs back
// within the server's TTL. Pass the key of the operation the IDs are
// for (an order's client-supplied key, say), so that a retried operation
// gets the ID it had and the database's unique key stops the duplicate.
// A key is 1 to 255 printable ASCII characters. It travels as the
// Idempotency-Key header, or as metadata of that name with WithGRPC; the
// server keeps HTTP and gRPC calls apart, so a key first used over one
// is refused over the other (idempotency.ErrKeyReused).
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyCtx{}, key)
}

// IdempotencyKey returns the key WithIdempotencyKey put in ctx.
func IdempotencyKey(ctx context.Context) (string, bool) {
	k, ok := ctx.Value(keyCtx{}).(string)
	return k, ok
}

// idemHeader returns the header of ctx's key, nil without one.
func idemHeader(ctx context.Context) (http.Header, error) {
	key, ok := IdempotencyKey(ctx)
	if !ok {
		return nil, nil
	}
	if _, err := idempotency.ParseKey(key); err != nil || key[0] == '"' {
		return nil, fmt.Errorf("client: %w: 1 to %d printable ASCII characters, not starting with a quote", idempotency.ErrInvalidKey, idempotency.MaxKeyLength)
	}
	return http.Header{idempotency.KeyHeader: {key}}, nil
}
