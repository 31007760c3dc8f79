// Package httpbench measures idgen over real HTTP and against a real
// database, beside the in-process numbers of package bench:
//
//   - requests/s of GET /id/{tag} as a ratio to a floor, a bare gin
//     handler with the same settings (cmd/floor), measured with wrk in
//     the same run, interleaved;
//   - latency at half of the maximum throughput, from an open-loop load
//     generator (OpenLoop) that times each request from when it was due,
//     not from when it was sent, so that a stalled server cannot hide its
//     stall by slowing the generator down;
//   - IDs/s of ?count=1000 batches, as JSON and as text;
//   - how often callers wait on the database when it is 100 ms away
//     (SlowStore), with the dynamic step on and off;
//   - how long IDs keep flowing from the buffers after the database
//     stops, and how long service takes to come back after it returns;
//   - unary gRPC Next on grpc-go's transport and on the main port, each
//     beside a bare handler of the same transport, and beside goLeaf
//     when IDGEN_BENCH_GOLEAF names its binary, with the same grpc-go
//     client (GRPCLoad), every answer checked for an ID and the first
//     IDs of each run for duplicates;
//   - server CPU per uncontended idgen.v1.LockService Acquire+Release
//     pair on grpc-go's transport (TestLiveLockGRPC), on SQLite and
//     PostgreSQL, beside a bare grpc-go handler doing one Redis SET NX PX
//     and one EVALSHA compare-and-delete (cmd/floor -lock-redis).
//
// The measurements are the TestLive… functions, which run only when
// -live.out names a directory for their JSON results; cmd/report runs
// them (all but TestLiveLockGRPC, which writes benchstat's input and its
// table itself) and renders the tables of docs/benchmarks.md. No test fails on a
// timing: they fail only when the setup fails or an answer is wrong (a
// duplicate ID).
package httpbench
