package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing/synctest"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/store/fence"
)

// The segment store: each incarnation's handle on the simulated
// id_sequence table. Every call parks until the simulator completes it
// (deliverOne, deliverAll), so the order of the store's transactions is
// the seed's.

type originKey struct{}

type opKind int

const (
	opReserve opKind = iota
	opCreate
	opRelease
	opRaise
)

var opNames = [...]string{opReserve: "reserve", opCreate: "create", opRelease: "release", opRaise: "raise"}

type op struct {
	p      *proc
	dead   *atomic.Bool // the caller's incarnation's
	hw     *fence.HighWater
	inc    int
	origin string
	kind   opKind
	tag    string
	a, b   int64 // step; max_id, step; from, to; to
	result chan opResult
}

type opResult struct {
	r   segment.Range
	ok  bool
	err error
}

var (
	errInjected = errors.New("sim: injected store failure")
	errGone     = errors.New("sim: connection closed")
	// errHeld is a reservation held back after a fence: a store outage
	// to the allocator, which tries again after its backoff.
	errHeld = fmt.Errorf("%w: held after a fence until the other instances have checked in", segment.ErrUnavailable)
)

type store struct {
	p    *proc
	inc  int
	dead *atomic.Bool
	hw   *fence.HighWater // the incarnation's, as its store's Guard's
}

func (s *store) call(ctx context.Context, o *op) opResult {
	if s.dead.Load() {
		return opResult{err: errGone}
	}
	o.p, o.inc, o.dead, o.hw = s.p, s.inc, s.dead, s.hw
	o.origin, _ = ctx.Value(originKey{}).(string)
	if o.origin == "" {
		o.origin = "load"
	}
	o.result = make(chan opResult, 1)
	db := s.p.w.db
	db.mu.Lock()
	if err := s.p.w.checkNegative(s.p, o); err != nil {
		db.late(err)
	}
	db.pending = append(db.pending, o)
	db.mu.Unlock()
	select {
	case r := <-o.result:
		return r
	case <-ctx.Done():
		db.mu.Lock()
		db.pending = slices.DeleteFunc(db.pending, func(x *op) bool { return x == o })
		db.mu.Unlock()
		return opResult{err: ctx.Err()}
	}
}

func (s *store) Reserve(ctx context.Context, tag string, step int64) (segment.Range, error) {
	r := s.call(ctx, &op{kind: opReserve, tag: tag, a: step})
	return r.r, r.err
}

func (s *store) CreateTag(ctx context.Context, t segment.Tag) error {
	if err := t.Validate(); err != nil {
		return err
	}
	return s.call(ctx, &op{kind: opCreate, tag: t.Name, a: t.MaxID, b: t.Step}).err
}

func (s *store) Release(ctx context.Context, tag string, from, to int64) (bool, error) {
	r := s.call(ctx, &op{kind: opRelease, tag: tag, a: from, b: to})
	return r.ok, r.err
}

func (s *store) Raise(ctx context.Context, tag string, to int64) (bool, error) {
	r := s.call(ctx, &op{kind: opRaise, tag: tag, a: to})
	return r.ok, r.err
}

// sortPending orders the pending calls by who made them, so that a pick
// by index is the same on every run whatever order goroutines parked in
// (db.mu held).
func (db *db) sortPending() {
	slices.SortFunc(db.pending, func(x, y *op) int {
		if x.inc != y.inc {
			return x.inc - y.inc
		}
		if c := strings.Compare(x.origin, y.origin); c != 0 {
			return c
		}
		if c := strings.Compare(x.tag, y.tag); c != 0 {
			return c
		}
		if x.kind != y.kind {
			return int(x.kind) - int(y.kind)
		}
		return cmp.Compare(x.a, y.a)
	})
}

// deliverOne completes one pending store call, picked by the seed, with a
// fault or without.
func (w *world) deliverOne() {
	w.db.mu.Lock()
	defer w.db.mu.Unlock()
	if len(w.db.pending) == 0 {
		return
	}
	w.db.sortPending()
	i := w.pick(len(w.db.pending))
	o := w.db.pending[i]
	w.db.pending = slices.Delete(w.db.pending, i, i+1)
	w.complete(o, w.faults)
}

// deliverAll completes every pending call that only selects (all if
// only is nil), and those they lead to, in order; with faults if asked.
func (w *world) deliverAll(faults bool, only func(*op) bool) {
	for range 100 {
		synctest.Wait()
		w.db.mu.Lock()
		w.db.sortPending()
		i := slices.IndexFunc(w.db.pending, func(o *op) bool { return only == nil || only(o) })
		if i < 0 {
			w.db.mu.Unlock()
			return
		}
		o := w.db.pending[i]
		w.db.pending = slices.Delete(w.db.pending, i, i+1)
		w.complete(o, faults)
		w.db.mu.Unlock()
	}
}

// complete applies o (db.mu held) and answers its caller.
func (w *world) complete(o *op, faults bool) {
	var res opResult
	defer func() {
		w.trace("  completed %d %s %s %s a=%d b=%d: %+v %v", o.inc, o.origin, opNames[o.kind], o.tag, o.a, o.b, res.r, res.err)
		o.result <- res
	}()
	if o.dead.Load() {
		res.err = errGone
		return
	}
	fault := 0
	if faults {
		switch r := w.pick(100); {
		case r < 10:
			fault = 1 // fails before the commit
		case r < 15:
			fault = 2 // commits, but the answer is lost (a timeout)
		}
	}
	if fault == 1 {
		res.err = errInjected
		return
	}
	res = w.apply(o, fault == 2)
	if fault == 2 {
		res = opResult{err: fmt.Errorf("%w after commit", errInjected)}
	}
}
