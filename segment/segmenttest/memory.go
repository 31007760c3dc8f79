// Package segmenttest helps test segment stores and the code that uses
// them: Memory is an in-memory Store that can be slowed down and made to
// fail on demand, and Run is the conformance suite every Store backend
// must pass.
package segmenttest

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idgen/idgen/segment"
)

// Memory is an in-memory segment.Store for tests. It is safe for
// concurrent use. The zero value is not usable; call NewMemory.
type Memory struct {
	mu   sync.Mutex
	rows map[string]*segment.Tag

	delay    atomic.Int64 // nanoseconds each Reserve takes
	fail     atomic.Pointer[error]
	reserves atomic.Int64
	calls    atomic.Int64
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{rows: make(map[string]*segment.Tag)} }

// SetDelay makes every later Reserve take d, or until its context ends.
func (m *Memory) SetDelay(d time.Duration) { m.delay.Store(int64(d)) }

// SetError makes every later Reserve fail with err; nil heals the store.
func (m *Memory) SetError(err error) {
	if err == nil {
		m.fail.Store(nil)
		return
	}
	m.fail.Store(&err)
}

// Reservations returns how many Reserve calls succeeded.
func (m *Memory) Reservations() int64 { return m.reserves.Load() }

// Calls returns how many times Reserve was called, failed or not.
func (m *Memory) Calls() int64 { return m.calls.Load() }

// Reserve implements segment.Store.
func (m *Memory) Reserve(ctx context.Context, tag string, step int64) (segment.Range, error) {
	m.calls.Add(1)
	if d := time.Duration(m.delay.Load()); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return segment.Range{}, ctx.Err()
		}
	}
	if err := m.fail.Load(); err != nil {
		return segment.Range{}, *err
	}
	if err := ctx.Err(); err != nil {
		return segment.Range{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	row, ok := m.rows[tag]
	if !ok {
		return segment.Range{}, fmt.Errorf("%w: %q", segment.ErrTagNotFound, tag)
	}
	end, err := segment.ClampEnd(tag, row.MaxID, max(step, row.Step))
	if err != nil {
		return segment.Range{}, err
	}
	r := segment.Range{Start: row.MaxID, End: end, Step: row.Step}
	row.MaxID = r.End
	row.UpdatedAt = time.Now()
	m.reserves.Add(1)
	return r, nil
}

// CreateTag implements segment.Store.
func (m *Memory) CreateTag(ctx context.Context, t segment.Tag) error {
	if err := t.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.rows[t.Name]; ok {
		return fmt.Errorf("%w: %q", segment.ErrTagExists, t.Name)
	}
	t.UpdatedAt = time.Now()
	m.rows[t.Name] = &t
	return nil
}

// Release implements segment.Releaser.
func (m *Memory) Release(ctx context.Context, tag string, from, to int64) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	row, ok := m.rows[tag]
	if !ok || row.MaxID != to {
		return false, nil
	}
	row.MaxID = from
	return true, nil
}

// Raise implements segment.Raiser.
func (m *Memory) Raise(ctx context.Context, tag string, to int64) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	row, ok := m.rows[tag]
	if !ok {
		return false, fmt.Errorf("%w: %q", segment.ErrTagNotFound, tag)
	}
	if row.MaxID >= to {
		return false, nil
	}
	row.MaxID = to
	return true, nil
}

// SetMaxID sets a tag's max_id to any value, lower too, as a restore from
// backup or a failover that lost commits would.
func (m *Memory) SetMaxID(tag string, maxID int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if row, ok := m.rows[tag]; ok {
		row.MaxID = maxID
	}
}

// ListTags returns every tag, ordered by name.
func (m *Memory) ListTags(ctx context.Context) ([]segment.Tag, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]segment.Tag, 0, len(m.rows))
	for _, r := range m.rows {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// TagOpaque returns the key fingerprint the tag was created under, ""
// for a plain tag (the stores' contract for opaque.Tags).
func (m *Memory) TagOpaque(ctx context.Context, tag string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	row, ok := m.rows[tag]
	if !ok {
		return "", fmt.Errorf("%w: %q", segment.ErrTagNotFound, tag)
	}
	return row.Opaque, nil
}

// SetStep changes a tag's step.
func (m *Memory) SetStep(ctx context.Context, tag string, step int64) error {
	if step < 1 || step > math.MaxInt32 {
		return fmt.Errorf("%w: step %d", segment.ErrInvalidStep, step)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	row, ok := m.rows[tag]
	if !ok {
		return fmt.Errorf("%w: %q", segment.ErrTagNotFound, tag)
	}
	row.Step = step
	return nil
}
