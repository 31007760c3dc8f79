package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/idgen/idgen/server"
)

// maxMetricsTagLimit bounds --metrics-tag-limit: about seven series a
// tag, so 10,000 tags are 70,000 series, the most one instance should
// ever export.
const maxMetricsTagLimit = 10_000

func metricsFlags(f *pflag.FlagSet) {
	f.StringSlice("metrics-tags", nil, "tags that always get /metrics series of their own, comma-separated")
	intFlag(f, "metrics-tag-limit", server.DefaultMetricsTagLimit,
		"most tags with /metrics series of their own, --metrics-tags included, the others the busiest, chosen again every 5 minutes; the rest are counted under tag=\""+server.OtherTag+"\" (0: --metrics-tags only)")
}

// readMetricsFlags reads and checks the metrics flags before serve
// touches the store.
func readMetricsFlags(cmd *cobra.Command) (server.MetricsConfig, error) {
	f := cmd.Flags()
	limit, _ := f.GetInt("metrics-tag-limit")
	tags, _ := f.GetStringSlice("metrics-tags")
	if limit < 0 || limit > maxMetricsTagLimit {
		return server.MetricsConfig{}, fmt.Errorf("--metrics-tag-limit must be 0 to %d, got %d", maxMetricsTagLimit, limit)
	}
	if len(tags) > limit {
		return server.MetricsConfig{}, fmt.Errorf("--metrics-tags names %d tags, more than --metrics-tag-limit %d: raise the limit", len(tags), limit)
	}
	cfg := server.MetricsConfig{TagLimit: limit, Tags: tags}
	if limit == 0 {
		cfg.TagLimit = -1 // named tags only
	}
	// The same checks NewMetricsConfig makes, here before any side effect.
	if _, err := server.NewMetricsConfig(cfg); err != nil {
		return server.MetricsConfig{}, fmt.Errorf("--metrics-tags: %w", err)
	}
	return cfg, nil
}
