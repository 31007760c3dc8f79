package snowflake_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/snowflake/snowflaketest"
)

func ExampleNew() {
	g, err := snowflake.New(snowflake.Config{WorkerID: 7})
	if err != nil {
		log.Fatal(err)
	}
	id, err := g.Next()
	if err != nil {
		log.Fatal(err)
	}
	p, err := g.Decode(id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(id > 0, p.WorkerID, time.Since(p.Time) < time.Minute)
	// Output: true 7 true
}

// manualClock is a Clock that moves only when told to, as tests need.
type manualClock struct {
	wall time.Time
	mono time.Duration
}

func (c *manualClock) Now() (time.Time, time.Duration) { return c.wall, c.mono }

// Sleep advances the clock instead of blocking.
func (c *manualClock) Sleep(d time.Duration) { c.wall, c.mono = c.wall.Add(d), c.mono+d }

func ExampleClock() {
	clock := &manualClock{wall: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	g, err := snowflake.New(snowflake.Config{WorkerID: 5, Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	ids, err := g.NextN(2)
	fmt.Println(ids, err)

	// NTP steps the wall clock back a second; the monotonic clock goes on.
	clock.wall = clock.wall.Add(-time.Second)
	_, err = g.Next()
	fmt.Println(err)
	// Output:
	// [21380884070420480 21380884070420481] <nil>
	// snowflake: clock moved backwards by 1s: the last timestamp issued is 2026-03-01T00:00:00Z; no IDs until the clock reaches it
}

// A restarted process is given its predecessor's last timestamp, so a
// clock that is now behind cannot make it reissue IDs.
func ExampleConfig_notBefore() {
	clock := &manualClock{wall: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	lastTimestamp := clock.wall.Add(3 * time.Millisecond) // from the lease table
	g, err := snowflake.New(snowflake.Config{WorkerID: 5, NotBefore: lastTimestamp, Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	id, err := g.Next() // waits 4ms, within MaxBackward plus a millisecond
	if err != nil {
		log.Fatal(err)
	}
	p, _ := g.Decode(id)
	fmt.Println(p.Time.Format(time.RFC3339Nano))
	// Output: 2026-03-01T00:00:00.004Z
}

func ExampleDecode() {
	p, err := snowflake.Decode(21380884070420481)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(p.Time, p.WorkerID, p.Sequence)

	_, err = snowflake.Decode(-1)
	fmt.Println(err)
	// Output:
	// 2026-03-01 00:00:00 +0000 UTC 5 1
	// snowflake: invalid ID: -1 is negative
}

func ExampleLayout_Encode() {
	// The smallest ID of a millisecond bounds a range query by time.
	var layout snowflake.Layout // the default
	from, err := layout.Encode(snowflake.Parts{Time: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)})
	fmt.Println(from, err)
	// Output: 21380884070400000 <nil>
}

func ExampleGenerator_Pause() {
	g, err := snowflake.New(snowflake.Config{WorkerID: 5})
	if err != nil {
		log.Fatal(err)
	}
	// The lease heartbeat learns that another process owns worker 5 now.
	g.Pause(fmt.Errorf("renew worker 5: %w", snowflake.ErrLeaseLost))
	_, err = g.Next()
	fmt.Println(errors.Is(err, snowflake.ErrNoWorkerLease), errors.Is(err, snowflake.ErrLeaseLost))

	// It claims worker 9 instead, whose previous holder last issued an ID
	// a moment ago.
	if err := g.Resume(9, time.Now().Add(-time.Second)); err != nil {
		log.Fatal(err)
	}
	id, err := g.Next()
	if err != nil {
		log.Fatal(err)
	}
	p, _ := g.Decode(id)
	fmt.Println(p.WorkerID)
	// Output:
	// true true
	// 9
}

func ExampleGenerator_AppendN() {
	g, err := snowflake.New(snowflake.Config{WorkerID: 5})
	if err != nil {
		log.Fatal(err)
	}
	buf := make([]int64, 0, 100)
	for range 3 {
		// Reusing buf, each batch of 100 costs no allocation and, usually,
		// one lock round.
		buf, err = g.AppendN(buf[:0], 100)
		if err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(len(buf), buf[0] < buf[99])
	// Output: 100 true
}

// A generator on a leased worker ID. In a program the store is
// store/postgres, store/mysql or store/sqlite; here it is in memory.
func ExampleNewLeased() {
	ctx := context.Background()
	store := snowflaketest.NewMemory()
	a, err := snowflake.NewLeased(ctx, store, snowflake.LeasedConfig{Owner: "instance-a"})
	if err != nil {
		log.Fatal(err)
	}
	b, err := snowflake.NewLeased(ctx, store, snowflake.LeasedConfig{Owner: "instance-b"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(a.WorkerID(), b.WorkerID(), a.Ready())

	id, err := a.Next(ctx, "order")
	if err != nil {
		log.Fatal(err)
	}
	p, _ := a.Layout().Decode(id)
	fmt.Println(p.WorkerID)

	// Close releases the worker ID for the next instance at once.
	if err := a.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	_, err = a.Next(ctx, "order")
	fmt.Println(errors.Is(err, snowflake.ErrClosed), errors.Is(err, snowflake.ErrNoWorkerLease))
	c, err := snowflake.NewLeased(ctx, store, snowflake.LeasedConfig{Owner: "instance-c"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.WorkerID())
	_ = b.Shutdown(ctx)
	_ = c.Shutdown(ctx)
	// Output:
	// 0 1 <nil>
	// 0
	// true true
	// 0
}

func ExampleNewTagged() {
	g, err := snowflake.New(snowflake.Config{WorkerID: 7})
	if err != nil {
		log.Fatal(err)
	}
	var gen idgen.Generator = snowflake.NewTagged(g) // what the server takes
	_, err = gen.Next(context.Background(), "not a tag")
	fmt.Println(errors.Is(err, idgen.ErrInvalidTag))
	// Output: true
}
