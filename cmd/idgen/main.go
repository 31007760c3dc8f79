// Command idgen runs the ID service and administers its database.
//
//	idgen serve                serve IDs over HTTP
//	idgen migrate              create or upgrade the schema
//	idgen tag add|list|step    manage segment tags
//	idgen import leaf|tinyid   copy Leaf's or tinyid's sequences into idgen's table
//	idgen decode ID            split an ID into its parts
//	idgen opaque keygen|decode keys and decoding of opaque IDs
//	idgen snowflake layout|relayout  show or change the recorded snowflake layout
//
// Every flag can also be set through the environment as IDGEN_<FLAG>,
// upper-cased with dashes as underscores (--default-step is
// IDGEN_DEFAULT_STEP). A flag given on the command line wins.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func main() {
	if err := newRoot().Execute(); err != nil {
		// Errors of the idgen package already say where they come from.
		msg := err.Error()
		if !strings.HasPrefix(msg, "idgen: ") {
			msg = "idgen: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "idgen",
		Short:         "Distributed 64-bit ID service: segment and snowflake modes",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildVersion(),
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return flagsFromEnv(cmd)
		},
	}
	root.PersistentFlags().String("store", "sqlite://./idgen.db",
		"database DSN: sqlite://PATH, postgres://user:pass@host:5432/db, or mysql://user:pass@host:3306/db")
	root.PersistentFlags().String("sequence-table", "id_sequence",
		"table segments are reserved from: id_sequence (idgen's own) or leaf_alloc (Meituan Leaf's, shared with Leaf servers; see docs/migrating.md)")
	root.AddCommand(newServe(), newMigrate(), newTag(), newHealth(), newDecode(), newImport(), newVersion(), newOpaque(), newSnowflake())
	root.SetVersionTemplate("idgen {{.Version}}\n")
	return root
}

// flagsFromEnv fills every flag not set on the command line from
// IDGEN_<FLAG>, so containers can be configured by environment alone.
func flagsFromEnv(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		name := "IDGEN_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%s=%q: %w", name, v, e)
			}
		}
	})
	return err
}
