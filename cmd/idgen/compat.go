package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/server"
	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/store"
)

// compatConfig is what serve needs to take over from Leaf, tinyid or a
// snowflake library: their APIs, and their ID layout and worker IDs.
type compatConfig struct {
	apis    server.Compat
	layout  snowflake.Layout
	workers snowflake.WorkerRange
}

// layoutFlags adds the snowflake layout flags, shared by serve and decode.
func layoutFlags(f *pflag.FlagSet) {
	f.String("snowflake-layout", "idgen",
		"snowflake ID layout: idgen (41/10/12 bits from 2026-01-01), leaf or twitter (41/10/12 from 1288834974657 ms), or TIME/WORKER/SEQUENCE bits")
	f.String("snowflake-epoch", "", "snowflake epoch, RFC 3339 or Unix milliseconds; replaces the layout's own")
}

func compatFlags(f *pflag.FlagSet) {
	layoutFlags(f)
	f.String("worker-range", "", "lease snowflake worker IDs only from FIRST-LAST (e.g. 512-1023), to run beside generators holding the others")
	f.String("compat", "", "also serve other services' APIs: leaf, tinyid, or leaf,tinyid (see docs/migrating.md)")
}

func readLayout(cmd *cobra.Command) (snowflake.Layout, error) {
	layout, _ := cmd.Flags().GetString("snowflake-layout")
	epoch, _ := cmd.Flags().GetString("snowflake-epoch")
	l, err := snowflake.ParseLayout(layout, epoch)
	if err != nil {
		return snowflake.Layout{}, fmt.Errorf("--snowflake-layout/--snowflake-epoch: %w", err)
	}
	return l, nil
}

func readCompatFlags(cmd *cobra.Command) (compatConfig, error) {
	var c compatConfig
	var err error
	if c.layout, err = readLayout(cmd); err != nil {
		return c, err
	}
	wr, _ := cmd.Flags().GetString("worker-range")
	if c.workers, err = snowflake.ParseWorkerRange(wr); err != nil {
		return c, fmt.Errorf("--worker-range: %w", err)
	}
	if c.workers.To > c.layout.MaxWorkerID()+1 {
		return c, fmt.Errorf("--worker-range %s: the layout's worker IDs end at %d", wr, c.layout.MaxWorkerID())
	}
	apis, _ := cmd.Flags().GetString("compat")
	if c.apis, err = server.ParseCompat(apis); err != nil {
		return c, fmt.Errorf("--compat: %w", err)
	}
	return c, nil
}

// staticConfig is the generator config of a static worker ID, which must
// lie in --worker-range when one is given.
func (c compatConfig) staticConfig(workerID int64) (snowflake.Config, error) {
	if w := c.workers; w != (snowflake.WorkerRange{}) && (workerID < w.From || workerID >= w.To) {
		return snowflake.Config{}, fmt.Errorf("--worker-id %d is outside --worker-range %s", workerID, w)
	}
	cfg := c.layout.Config()
	cfg.WorkerID = workerID
	return cfg, nil
}

// checkSharedTable reads the shared sequence table once at start: a
// missing table fails the start with a message that names it, instead of
// a server that is ready and answers every request late with 503. It
// logs every tag idgen refuses, with the rule it breaks: Leaf allows 128
// characters of anything, idgen 64 of [A-Za-z0-9_.:-]. Those tags stay
// Leaf's until renamed.
func checkSharedTable(ctx context.Context, st *store.Store, log *slog.Logger) error {
	tags, err := st.ListTags(ctx)
	if err != nil {
		name := store.LeafAlloc
		return fmt.Errorf("--sequence-table %s: cannot read table %s in --store; create it with Leaf's DDL, or leave --sequence-table at %s: %w",
			name, name, store.IDSequence, err)
	}
	for _, t := range tags {
		if err := idgen.CheckTag(t.Name); err != nil {
			log.Warn("tag in the shared sequence table will be refused", "tag", t.Name, "rule", err)
		}
	}
	return nil
}
