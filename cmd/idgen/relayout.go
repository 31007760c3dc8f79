package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/store"
)

func newSnowflake() *cobra.Command {
	sf := &cobra.Command{Use: "snowflake", Short: "Show or change the snowflake layout recorded in the store"}

	show := &cobra.Command{
		Use:   "layout",
		Short: "List the snowflake layouts the store's worker IDs have issued IDs in",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd, func(st *store.Store) error {
				recs, err := st.Leases().Layouts(cmd.Context())
				if err != nil {
					return err
				}
				p := newTable(cmd.OutOrStdout(), "LAYOUT\tWORKER IDS\tSTATE")
				for _, r := range recs {
					p.printf("%s\t%s\t%s\n", r.Layout, orNone(r.Workers.String()), state(r))
				}
				return p.end()
			})
		},
	}

	relayout := &cobra.Command{
		Use:   "relayout",
		Short: "Move the store's worker IDs to another snowflake layout or epoch, with no ID twice",
		Long: `Move the store's worker IDs to the layout and epoch given by --snowflake-layout
and --snowflake-epoch, as serve takes them. Stop every instance that leases
from the store first: relayout refuses while any lease is live.

It retires every layout in use and records the new one with a floor: the
new layout's first ID is greater than every ID the old ones can have issued,
so no ID can repeat whatever changed. An ID's time is its top bits, so that
floor exists for every change; what it costs is waiting. An earlier epoch,
fewer time bits or other worker/sequence widths start at once; an epoch
moved later by D waits D; one more time bit waits as long again as the old
epoch is past. Instances started with the new layout are not ready until
the floor has passed; relayout refuses a floor more than --max-wait away
and names the latest epoch that would start at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			to, err := readLayout(cmd)
			if err != nil {
				return err
			}
			maxWait, _ := cmd.Flags().GetDuration("max-wait")
			if maxWait < 0 {
				return fmt.Errorf("--max-wait must not be negative, got %v", maxWait)
			}
			return withStore(cmd, func(st *store.Store) error {
				now := time.Now()
				rec, err := st.Leases().Relayout(cmd.Context(), to, now, maxWait)
				if err != nil {
					return err
				}
				p := &printer{w: cmd.OutOrStdout()}
				p.printf("snowflake layout now %s\n", rec.Layout)
				if wait := rec.NotBefore.Sub(now); wait > 0 {
					p.printf("its IDs start after %s: instances are not ready for another %v\n",
						rec.NotBefore.Format(time.RFC3339Nano), wait.Round(time.Millisecond))
				}
				p.printf("start the instances with --snowflake-layout %d/%d/%d --snowflake-epoch %s\n",
					rec.Layout.TimeBits(), rec.Layout.WorkerBits(), rec.Layout.SequenceBits(), rec.Layout.Epoch().Format(time.RFC3339Nano))
				return p.err
			})
		},
	}
	layoutFlags(relayout.Flags())
	relayout.Flags().Duration("max-wait", time.Minute, "refuse a layout whose first ID lies further in the future than this")

	sf.AddCommand(show, relayout)
	return sf
}

func orNone(s string) string {
	if s == "" {
		return "none yet"
	}
	return s
}

func state(r snowflake.LayoutRecord) string {
	switch {
	case !r.Retired.IsZero():
		return "retired at " + r.Retired.Format(time.RFC3339Nano)
	case !r.NotBefore.IsZero():
		return "in use, IDs after " + r.NotBefore.Format(time.RFC3339Nano)
	}
	return "in use"
}

// layoutRefusal explains a claim refused for its layout: what is recorded,
// and the safe ways to change, with a worker range of the new layout whose
// IDs cannot meet the recorded ones if there is one.
func layoutRefusal(ctx context.Context, st *store.Store, c serveConfig, err error) error {
	if !errors.Is(err, snowflake.ErrLayoutMismatch) {
		return err
	}
	l := c.compat.layout
	ways := "give these instances a --worker-range whose IDs cannot meet the recorded ones"
	if recs, lerr := st.Leases().Layouts(ctx); lerr == nil {
		if wr, ok := freeWorkerRange(recs, l); ok {
			ways += fmt.Sprintf(" (%s is free for %s)", wr, l)
		} else {
			ways += fmt.Sprintf(" (none is left for %s)", l)
		}
	}
	return fmt.Errorf(`snowflake worker lease: %w
The store's worker IDs keep their layout and epoch, or they would issue the same IDs again. To change them safely:
  - %s;
  - or use a store (a lease table) of their own;
  - or stop every instance, run "idgen snowflake relayout --snowflake-layout %d/%d/%d --snowflake-epoch %s" on this store, and start them again with the new flags.
"idgen snowflake layout" lists what is recorded; docs/snowflake.md explains each way`,
		err, ways, l.TimeBits(), l.WorkerBits(), l.SequenceBits(), l.Epoch().Format(time.RFC3339Nano))
}

// freeWorkerRange returns the largest aligned range of l's worker IDs that
// the records admit, trying up to 1024 blocks of each size.
func freeWorkerRange(recs []snowflake.LayoutRecord, l snowflake.Layout) (snowflake.WorkerRange, bool) {
	n := l.MaxWorkerID() + 1
	for size := n; size >= 1 && n/size <= 1024; size /= 2 {
		for from := int64(0); from < n; from += size {
			wr := snowflake.WorkerRange{From: from, To: from + size}
			if _, _, err := snowflake.AdmitLayout(recs, l, wr); err == nil {
				return wr, true
			}
		}
	}
	return snowflake.WorkerRange{}, false
}
