package sqlstore

import (
	"context"
	"fmt"
	"math"

	"github.com/idgen/idgen/store/fence"
	"github.com/idgen/idgen/store/internal/plant"
)

// primitives is fence.Tx in SQL: the protocol's steps (package fence)
// run as the statements of IdentitySQL on one transaction q.
type primitives struct {
	g *Guard
	q Querier
}

var _ fence.Tx = primitives{}

func (t primitives) Lock(ctx context.Context) error {
	var gen int64
	if err := t.q.QueryRow(ctx, t.g.id.Lock).Scan(&gen); err != nil {
		return fmt.Errorf("lock idgen_fence (is migration 00005 applied?): %w", err)
	}
	return nil
}

// Read also remembers the record's hold: whether or not this process
// fences, the record may end a hold it must honour, another process's
// fence found here by a process whose reservations then read the server
// alone (the one-statement path).
func (t primitives) Read(ctx context.Context) (fence.Identity, fence.Record, error) {
	r, err := t.g.readAll(ctx, t.q)
	if err != nil {
		return fence.Identity{}, fence.Record{}, err
	}
	r.fixup()
	t.g.sawHold(r.rec.FenceUntil)
	return r.cur, r.rec, nil
}

func (t primitives) Tick(ctx context.Context, cur fence.Identity) (fence.Identity, error) {
	if t.g.id.Tick == "" {
		return cur, nil
	}
	if _, err := t.q.Exec(ctx, t.g.id.Tick); err != nil {
		return cur, err
	}
	cur.Position = tickNext(cur.Position)
	return cur, nil
}

// Used counts idgen's own rows: id_sequence's (leaf_alloc's rows are
// Leaf's, there before idgen) and worker_node's.
func (t primitives) Used(ctx context.Context) (bool, error) {
	tables, err := t.g.tables(ctx, t.q)
	if err != nil {
		return false, err
	}
	stmts := []string{t.g.id.WorkerRows}
	for _, st := range tables {
		if st.Name == IDSequence.Name {
			stmts = append(stmts, t.g.id.Rows[st.Name])
		}
	}
	for _, st := range stmts {
		var n int64
		if err := t.q.QueryRow(ctx, st).Scan(&n); err != nil {
			return false, fmt.Errorf("count the store's rows: %w", err)
		}
		if n > 0 {
			return true, nil
		}
	}
	return false, nil
}

func (t primitives) NewestLease(ctx context.Context) (int64, error) {
	var newest int64
	err := t.q.QueryRow(ctx, t.g.id.NewestLease).Scan(&newest)
	return newest, err
}

func (t primitives) CountLive(ctx context.Context, since int64) (count, rangeCap int64, err error) {
	err = t.q.QueryRow(ctx, t.g.id.CountLive, since).Scan(&count, &rangeCap)
	return count, rangeCap, err
}

func (t primitives) Tables(ctx context.Context) ([]string, error) {
	tables, err := t.g.tables(ctx, t.q)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(tables))
	for i, st := range tables {
		out[i] = st.Name
	}
	return out, nil
}

func (t primitives) MaxStep(ctx context.Context, table string) (int64, error) {
	var step int64
	err := t.q.QueryRow(ctx, t.g.id.MaxStep[table]).Scan(&step)
	return step, err
}

func (t primitives) Bump(ctx context.Context, table string, margin int64) error {
	_, err := t.q.Exec(ctx, t.g.id.Bump[table], int64(math.MaxInt64)-margin, margin)
	return err
}

func (t primitives) Hold(ctx context.Context, liveSince, until int64) error {
	_, err := t.q.Exec(ctx, t.g.id.Hold, until, liveSince, until)
	return err
}

func (t primitives) MarkCounted(ctx context.Context, since, liveSince int64) error {
	_, err := t.q.Exec(ctx, t.g.id.MarkCounted, since, liveSince)
	return err
}

func (t primitives) Floor(ctx context.Context, until int64) error {
	_, err := t.q.Exec(ctx, t.g.id.Floor, until, until)
	return err
}

// Write also remembers the hold the record ends: the fencer's own
// reservations honour it like everyone's.
func (t primitives) Write(ctx context.Context, to fence.Record, fenced bool, at int64) error {
	var fences int64
	if fenced {
		fences = 1
	}
	t.g.sawHold(to.FenceUntil)
	if _, err := t.q.Exec(ctx, t.g.id.Write, string(to.Kind), to.System, to.Timeline, to.Position, to.Generation, to.FenceUntil,
		to.Floor, to.Covers, fences, at); err != nil {
		return fmt.Errorf("record the identity: %w", err)
	}
	return nil
}

// Raise creates a row it finds missing, at to, with the step this
// process reserved it with: a creation the store lost (a failover during
// the lag) is not re-created below what a live instance still hands out.
func (t primitives) Raise(ctx context.Context, tag string, to int64) error {
	n, err := t.q.Exec(ctx, t.g.d.Witness, to, tag, to)
	if err != nil || n > 0 || plant.On("F3") {
		return err
	}
	_, err = t.q.Exec(ctx, t.g.d.WitnessCreate, tag, to, t.g.stepOf(tag))
	return err
}

// RaiseToken raises the lock's mark, which every grant takes its token
// above and which a row below holds nothing (Locks): the row itself may
// hold a grant the store kept, older than token.
func (t primitives) RaiseToken(ctx context.Context, name string, token int64) error {
	n, err := t.q.Exec(ctx, t.g.id.LockRaise, token, name, token)
	if err != nil || n > 0 {
		return err
	}
	_, err = t.q.Exec(ctx, t.g.id.LockRaiseCreate, name, token)
	return err
}
