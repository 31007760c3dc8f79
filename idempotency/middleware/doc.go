// Package middleware makes a caller's own handlers idempotent with the
// protocol of package idempotency, so that business code does not
// repeat it: a request that carries an Idempotency-Key is run once, its
// answer (status, chosen headers, body) is recorded under the caller's
// key and scope, and every repeat within the key's TTL gets that answer
// back with Idempotent-Replayed: true, from any instance sharing the
// store. A repeat of another request (another method, path or body)
// gets 422, and a repeat while the first runs waits briefly for it and
// then gets 409 with a Retry-After, as on idgen's own routes.
//
// New builds a net/http middleware (Handler); its Gin method adapts it
// to gin, and its Connect method is a connect-go interceptor for unary
// procedures, which Replays registers.
// The store is any idempotency.Store: package store's SQL stores
// (PostgreSQL, MySQL, SQLite) or package redisstore.
//
// The handler runs through idempotency.Keeper.Do: once per key however
// slow, on a request context that ends if the key's hold is lost. Pass
// that context on, so that the handler stops then.
//
// Answers of 5xx are not recorded, nor is a handler that panics (on
// every transport): the key is freed, so that a retry runs the handler
// again. Everything
// below 500 is recorded, since a 4xx of a business handler (a
// validation error, a declined payment) is its answer to that request.
// The answer is buffered until the handler returns, so a streaming
// handler does not belong behind it.
package middleware
