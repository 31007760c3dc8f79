// Package dedup lets a queue consumer skip the messages it already
// processed. Brokers such as Kafka, RocketMQ, Redis Streams and NATS
// JetStream deliver at least once: a consumer that dies between its
// work and its acknowledgement gets the message again. Deduper.Do runs
// the consumer's handler at most once per (group, message key) to
// completion.
//
// On the SQL stores (store.Store.Dedup: PostgreSQL, MySQL and MariaDB,
// SQLite) the "processed" record is a row inserted in the caller's own
// transaction, before the handler's business write in that same
// transaction, so that the two commit together or not at all:
//
//   - a redelivery of a committed message finds the row, and Do returns
//     ErrProcessed without running the handler;
//   - a handler that fails, or a consumer that dies, leaves nothing once
//     its transaction rolls back, so the redelivery runs the handler;
//   - a duplicate that arrives while the first is in flight waits on the
//     row's primary key (SQLite: its write lock) until the first
//     transaction ends, and then gets ErrProcessed or runs, as above.
//     It never runs beside the first.
//
// Marking a message seen before its handler runs, outside the
// handler's transaction, is the common mistake this avoids: a handler
// that then fails leaves the mark behind, and the retry is dropped as a
// duplicate, so the message is lost.
//
// Package redisdedup does the same over Redis, which cannot share a
// transaction with the business write: see there for what it promises.
//
// Records are kept for Config.Retention, and swept in batches by Sweep
// (Start runs it periodically), as idempotency keys are; the retention
// must outlast every redelivery of a message. See docs/dedup.md.
package dedup
