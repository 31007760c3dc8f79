package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

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
	// Owner names this process in worker_node. Zero means
	// snowflake.NewOwner().
	Owner string
	// TTL is how long the presence lasts unless renewed: the same as the
	// fleet's --lease-ttl, since fences hold for that long. Zero means
	// 30s.
	TTL time.Duration
	// Logger receives failed renewals and re-claims. Nil means discard.
	Logger *slog.Logger
}

// Presence is a presence lease: a row of worker_node, above every worker
// ID a snowflake layout can use, that an instance holds while it reserves
// segments without holding a snowflake worker lease (serve with
// --snowflake=false, or a program that embeds segment over a Store).
//
// Why: after a fence, other instances' reservations wait until every
// live lease has checked in, and the check-in is where an instance raises
// each tag it reserved to the end of the highest range it holds (the
// witness raise, see package fence). An instance without a lease is
// neither waited for nor counted in the margin: a range of it that the
// store lost can be reserved again while it still hands it out. The
// presence's renewal, every TTL/3, is its check-in.
//
// A Presence is safe for concurrent use; Close releases the row.
type Presence struct {
	leases *sqlstore.Leases
	ttl    time.Duration
	log    *slog.Logger
	owner  string

	mu    sync.Mutex
	lease snowflake.Lease // Owner "" while none is held

	stop context.CancelFunc
	done chan struct{}
}

// Presence claims a presence lease and keeps it until Close. Call it
// after Migrate and ConfigureFence, before the first reservation.
func (s *Store) Presence(ctx context.Context, c PresenceConfig) (*Presence, error) {
	if c.TTL < 0 {
		return nil, fmt.Errorf("%w: presence TTL %v is negative", snowflake.ErrInvalidConfig, c.TTL)
	}
	if c.TTL == 0 {
		c.TTL = 30 * time.Second
	}
	if c.Owner == "" {
		c.Owner = snowflake.NewOwner()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Presence{leases: s.leases, ttl: c.TTL, log: c.Logger.With("owner", c.Owner), owner: c.Owner, done: make(chan struct{})}
	if err := p.claim(ctx); err != nil {
		return nil, err
	}
	hctx, stop := context.WithCancel(context.Background())
	p.stop = stop
	go p.run(hctx)
	return p, nil
}

func (p *Presence) claim(ctx context.Context) error {
	l, err := p.leases.ClaimRange(ctx, p.owner, time.Now(), p.ttl, sqlstore.PresenceFrom, sqlstore.PresenceTo)
	if err != nil {
		return fmt.Errorf("store: claim a presence lease: %w", err)
	}
	p.mu.Lock()
	p.lease = l
	p.mu.Unlock()
	return nil
}

// run renews every TTL/3, and a fifth of that after a failure; a lease
// found lost is claimed again.
func (p *Presence) run(ctx context.Context) {
	defer close(p.done)
	every := p.ttl / 3
	timer := time.NewTimer(every)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
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
	renewed, err := p.leases.Renew(ctx, l, now, now, p.ttl)
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

// Close stops the renewals and releases the row, within ctx.
func (p *Presence) Close(ctx context.Context) error {
	p.stop()
	<-p.done
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
