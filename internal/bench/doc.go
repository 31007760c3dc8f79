// Package bench measures idgen's generators against other Go ID
// generators in one process and one run, so that the numbers are taken on
// the same machine under the same load and can be compared row by row.
//
// It is a module of its own so that the peers it imports never become
// dependencies of github.com/idgen/idgen. Run everything with
//
//	go run ./cmd/report
//
// from this directory; it runs the benchmarks, keeps the raw output in
// results/inprocess.txt and writes a Markdown summary to
// results/inprocess.md.
package bench
