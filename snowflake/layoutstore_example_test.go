package snowflake_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/idgen/idgen/snowflake"
)

// A lease table whose worker IDs issued IDs in the default layout refuses
// the same worker IDs with the epoch moved 6684 ms later; a relayout lets
// the new epoch in once its IDs are above the old ones.
func ExamplePlanRelayout() {
	recorded := []snowflake.LayoutRecord{{Layout: snowflake.Layout{}, Workers: snowflake.WorkerRange{From: 0, To: 1024}}}
	later, _ := snowflake.ParseLayout("idgen", "2026-01-01T00:00:06.684Z")
	all := snowflake.WorkerRange{From: 0, To: later.MaxWorkerID() + 1}

	_, _, err := snowflake.AdmitLayout(recorded, later, all)
	fmt.Println(errors.Is(err, snowflake.ErrLayoutMismatch))

	last := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC) // the old layout's last millisecond
	moved, err := snowflake.PlanRelayout(recorded, last, later, last.Add(time.Second), time.Minute)
	if err != nil {
		panic(err)
	}
	next := moved[len(moved)-1]
	fmt.Println(next.Layout, "issues after", next.NotBefore.Format(time.RFC3339Nano))
	_, _, err = snowflake.AdmitLayout(moved, later, all)
	fmt.Println(err)
	// Output:
	// true
	// 41/10/12 epoch 2026-01-01T00:00:06.684Z issues after 2026-06-01T00:00:06.684Z
	// <nil>
}
