package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version overrides the module version from the build info, for builds
// that know better: go build -ldflags "-X main.version=v1.2.3". The linker
// can only set a package variable, hence this one.
var version string

// buildVersion is the version that --version, the startup line and
// idgen_build_info report.
func buildVersion() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Version == "" {
		return "unknown"
	}
	if bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	// A build outside a tagged module: name the commit when Go stamped it.
	v, dirty := "devel", ""
	for _, kv := range bi.Settings {
		switch {
		case kv.Key == "vcs.revision" && len(kv.Value) >= 12:
			v += "+" + kv.Value[:12]
		case kv.Key == "vcs.modified" && kv.Value == "true":
			dirty = "-dirty"
		}
	}
	return v + dirty
}

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "idgen %s (%s, %s/%s)\n", buildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}
