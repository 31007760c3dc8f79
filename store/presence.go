package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/store/internal/sqlstore"
)

// PresenceFrom is the first worker_node row of presence leases: tools
// that read the table for snowflake workers leave out the rows from it
// on.
const PresenceFrom = sqlstore.PresenceFrom

// PresenceConfig configures Store.Presence. The zero value of every field
// selects the default written next to it.
type PresenceConfig struct {
	// Owner names this process in worker_node. Zero means the store's
	// (Store.Owner).
	Owner string
	// TTL is how long the presence lasts unless renewed: the same as the
	// fleet's --lease-ttl, since fences hold for that long. Zero means
	// the fleet's as the store records it, or, until the store has been
	// read, the LeaseTTL given to ConfigureFence (30s by default).
	TTL time.Duration
	// Logger receives failed renewals and re-claims. Nil means discard.
	Logger *slog.Logger
}

// Presence is a presence lease: a row of worker_node, above every worker
// ID a snowflake layout can use, that a process holds while it reserves
// segments, whether or not it also holds a snowflake worker lease.
//
// Why: after a fence, other instances' reservations wait until every
// live lease has checked in, and the check-in is where an instance raises
// each tag it reserved to the end of the highest range it holds (the
// witness raise, see package fence). A process without a lease is
// neither waited for nor counted in the margin: a range of it that the
// store lost can be reserved again while it still hands it out. The
// presence's renewal, every TTL/3, is its check-in.
//
// A Store takes one itself before its first reservation, creation, raise
// or bump, and releases it in Close; call Store.Presence only to claim
// it earlier (at start, to fail fast) or with another owner or TTL.
//
// A Presence is safe for concurrent use; Close releases the row.
type Presence struct {
	leases *sqlstore.Leases
	ttl    func() time.Duration
	log    *slog.Logger
	owner  string
	// closed, if set, is called by Close: the store then claims its own
	// presence again at its next reservation.
	closed func(*Presence)

	mu    sync.Mutex
	lease snowflake.Lease // Owner "" while none is held

	stop context.CancelFunc
	done chan struct{}
}

// Presence claims a presence lease and keeps it until Close. Call it
// after Migrate and ConfigureFence. While it is held, the store takes no
// presence of its own (the witness raise is the store's, whichever owner
// checks in); after its Close, the store claims one again at its next
// reservation.
func (s *Store) Presence(ctx context.Context, c PresenceConfig) (*Presence, error) {
	if c.TTL < 0 {
		return nil, fmt.Errorf("%w: presence TTL %v is negative", snowflake.ErrInvalidConfig, c.TTL)
	}
	if c.Owner == "" {
		c.Owner = s.owner
	}
	p, err := s.startPresence(ctx, c)
	if err != nil {
		return nil, err
	}
	s.presMu.Lock()
	if !s.closed && s.pres.CompareAndSwap(nil, p) {
		p.closed = s.presenceClosed
	}
	s.presMu.Unlock()
	return p, nil
}

// startPresence claims a presence lease and starts its renewals.
func (s *Store) startPresence(ctx context.Context, c PresenceConfig) (*Presence, error) {
	ttl := func() time.Duration { return c.TTL }
	if c.TTL == 0 {
		ttl = s.leaseTTL
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Presence{leases: s.leases, ttl: ttl, log: c.Logger.With("owner", c.Owner), owner: c.Owner, done: make(chan struct{})}
	if err := p.claim(ctx); err != nil {
		return nil, err
	}
	hctx, stop := context.WithCancel(context.Background())
	p.stop = stop
	go p.run(hctx)
	return p, nil
}

func (p *Presence) claim(ctx context.Context) error {
	l, err := p.leases.ClaimRange(ctx, p.owner, time.Now(), p.ttl(), sqlstore.PresenceFrom, sqlstore.PresenceTo)
	if err != nil {
		return fmt.Errorf("store: claim a presence lease: %w", err)
	}
	p.mu.Lock()
	p.lease = l
	p.mu.Unlock()
	return nil
}

// run renews every TTL/3, and a fifth of that after a failure; a lease
// found lost is claimed again. The TTL is read at every round: a
// presence claimed before the store's recorded TTL was read follows it
// from its first renewal.
func (p *Presence) run(ctx context.Context) {
	defer close(p.done)
	every := p.ttl() / 3
	timer := time.NewTimer(every)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		every = p.ttl() / 3
		rctx, cancel := context.WithTimeout(ctx, every)
		err := p.renew(rctx)
		cancel()
		if err != nil {
			p.log.Warn("store: presence lease renewal failed", "err", err)
			timer.Reset(every / 5)
			continue
		}
		timer.Reset(every)
	}
}

func (p *Presence) renew(ctx context.Context) error {
	p.mu.Lock()
	l := p.lease
	p.mu.Unlock()
	if l.Owner == "" {
		return p.claim(ctx)
	}
	now := time.Now()
	renewed, err := p.leases.Renew(ctx, l, now, now, p.ttl())
	if errors.Is(err, snowflake.ErrLeaseLost) {
		p.log.Warn("store: presence lease lost; claiming another", "worker_id", l.WorkerID)
		p.mu.Lock()
		p.lease = snowflake.Lease{}
		p.mu.Unlock()
		return p.claim(ctx)
	}
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.lease = renewed
	p.mu.Unlock()
	return nil
}

// WorkerID returns the worker_node row held, -1 while none is.
func (p *Presence) WorkerID() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lease.Owner == "" {
		return -1
	}
	return p.lease.WorkerID
}

// Owner returns the owner the row is held under.
func (p *Presence) Owner() string { return p.owner }

// Close stops the renewals and releases the row, within ctx. The
// release is a checked transaction: after a fence this process has not
// yet witnessed, it raises what the process reserved first.
func (p *Presence) Close(ctx context.Context) error {
	p.stop()
	<-p.done
	if p.closed != nil {
		p.closed(p)
	}
	p.mu.Lock()
	l := p.lease
	p.lease = snowflake.Lease{}
	p.mu.Unlock()
	if l.Owner == "" {
		return nil
	}
	if err := p.leases.Release(ctx, l, l.LastTimestamp); err != nil && !errors.Is(err, snowflake.ErrLeaseLost) {
		return fmt.Errorf("store: release the presence lease: %w", err)
	}
	return nil
}

// presenceClosed forgets p as the store's presence.
func (s *Store) presenceClosed(p *Presence) {
	s.presMu.Lock()
	s.pres.CompareAndSwap(p, nil)
	s.presMu.Unlock()
}

// ErrNoPresence is returned, wrapping segment.ErrUnavailable, by a
// reservation, creation, raise or bump while the store's presence lease
// was lost and is not yet claimed again (its renewals retry every
// fifteenth of the TTL): a process that no fence counts must not reserve.
var ErrNoPresence = fmt.Errorf("%w: store: this process's presence lease was lost and is not yet claimed again", segment.ErrUnavailable)

// presenceCloseTimeout bounds the release of the store's presence in
// Close, which has no context: a database that does not answer must not
// keep Close from returning. The row then lapses after its TTL.
const presenceCloseTimeout = 5 * time.Second

// present makes sure the process holds a presence lease before it
// writes to the sequence table, claiming the store's own if it holds
// none: a claim that fails fails the write, and the next write tries
// again, so that no write goes unwitnessed. Concurrent first writes wait
// for one claim. A store without fencing needs none.
func (s *Store) present(ctx context.Context) error {
	if s.guard == nil || s.conn.NoFence != nil {
		return nil
	}
	if p := s.pres.Load(); p != nil {
		if p.WorkerID() < 0 {
			return ErrNoPresence
		}
		return nil
	}
	for {
		s.presMu.Lock()
		if s.closed || s.pres.Load() != nil {
			s.presMu.Unlock()
			return nil
		}
		if wait := s.claiming; wait != nil {
			s.presMu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		done := make(chan struct{})
		s.claiming = done
		s.presMu.Unlock()

		var p *Presence
		err := s.guard.ReadParams(ctx)
		if err != nil {
			err = fmt.Errorf("store: claim a presence lease: %w", err)
		}
		if err == nil {
			p, err = s.startPresence(ctx, PresenceConfig{Owner: s.owner})
		}
		s.presMu.Lock()
		s.claiming = nil
		late := err == nil && s.closed
		if err == nil && !late {
			p.closed = s.presenceClosed
			s.pres.Store(p)
		}
		s.presMu.Unlock()
		close(done)
		if late { // Close ran meanwhile: release the row at once
			cctx, cancel := context.WithTimeout(context.Background(), presenceCloseTimeout)
			defer cancel()
			_ = p.Close(cctx)
		}
		return err
	}
}

// closePresence releases the store's presence, if it holds one.
func (s *Store) closePresence() error {
	s.presMu.Lock()
	s.closed = true
	p := s.pres.Load()
	s.presMu.Unlock()
	if p == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), presenceCloseTimeout)
	defer cancel()
	return p.Close(ctx)
}
