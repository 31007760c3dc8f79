package fence_test

import (
	"fmt"
	"time"

	"github.com/idgen/idgen/store/fence"
)

// A fresh process after a PostgreSQL promotion: the server is the same
// cluster on a new timeline, so the store must be fenced first.
func ExampleDecide() {
	rec := fence.Record{Identity: fence.Identity{Kind: fence.Postgres, System: "7714258027218440216", Timeline: "00000001"}, Generation: 1}
	promoted := fence.Identity{Kind: fence.Postgres, System: "7714258027218440216", Timeline: "00000002", Position: "0/3000148"}
	d := fence.Decide(fence.Memory{}, promoted, rec)
	fmt.Println(d.Verdict, "-", d.Reason)
	// Output: fence - the server is not the recorded history postgres:7714258027218440216 timeline 00000001
}

// What a fence with the defaults does while three instances hold leases:
// 2 ranges of the default cap for each of them and for one the store
// lost track of, counted for two failovers (fence.MinFailovers).
func ExampleNewPlan() {
	c, _ := fence.Config{}.Check()
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	p := fence.NewPlan(c, now, fence.Record{Generation: 1}, fence.Memory{}, fence.Identity{}, fence.Live{Count: 3})
	fmt.Println("max_id up by", p.Margin)
	fmt.Println("leases held, floors raised until", time.UnixMilli(p.HoldUntil).UTC().Format(time.TimeOnly))
	// Output:
	// max_id up by 16000000
	// leases held, floors raised until 09:00:33
}

// A second failover within one replication lag lost the first one's
// fence (floor 8,000,000), and the process that reaches the store first
// saw it: its fence adds the lost margin to its own, and a tag created
// afterwards starts above both.
func ExampleNewPlan_lostFence() {
	c, _ := fence.Config{}.Check()
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	rec := fence.Record{Generation: 1} // what the promoted replica had
	saw := fence.Memory{}.Observe(fence.Identity{Kind: fence.Postgres, System: "7714", Timeline: "00000002"},
		fence.Record{Generation: 2, Floor: 8_000_000})
	p := fence.NewPlan(c, now, rec, saw, fence.Identity{}, fence.Live{Count: 3})
	fmt.Println("max_id up by", p.Margin, "of which", p.Lost, "for the lost fence")
	fmt.Println("a new tag starts at", fence.Start(fence.Record{Generation: p.Generation, Floor: p.Floor}, 1))
	// Output:
	// max_id up by 16000000 of which 8000000 for the lost fence
	// a new tag starts at 16000001
}
