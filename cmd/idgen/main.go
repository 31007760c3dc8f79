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
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func main() {
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, cliMessage(err))
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
			if cmd.Name() != "serve" { // serve logs them, in its log format
				for _, w := range unknownEnv(cmd, os.Environ()) {
					_, _ = fmt.Fprintln(cmd.ErrOrStderr(), "idgen: warning:", w)
				}
			}
			return flagsFromEnv(cmd)
		},
	}
	root.PersistentFlags().String("store", "sqlite://./idgen.db",
		"database DSN: sqlite://PATH, postgres://user:pass@host:5432/db, or mysql://user:pass@host:3306/db")
	root.PersistentFlags().String("sequence-table", "id_sequence",
		"table segments are reserved from: id_sequence (idgen's own) or leaf_alloc (Meituan Leaf's, shared with Leaf servers; see docs/migrating.md)")
	root.AddCommand(newServe(), newMigrate(), newTag(), newHealth(), newDecode(), newImport(), newVersion(), newOpaque(), newSnowflake())
	root.SetVersionTemplate("idgen {{.Version}}\n")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		// Other servers take a port; idgen takes an address.
		if strings.HasPrefix(err.Error(), "unknown flag: --port") && cmd.Flags().Lookup("addr") != nil {
			return fmt.Errorf("%w: the listen address is --addr (IDGEN_ADDR), host:port or :port, such as --addr :8081", err)
		}
		return err
	})
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
		name := envName(f.Name)
		if v, ok := os.LookupEnv(name); ok {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%s=%q: %w", name, v, e)
				if f.Value.Type() == "bool" {
					// strconv.ParseBool's own text names neither.
					err = fmt.Errorf("%s=%q is not a boolean: set it to true or false (1, 0, t and f work too)", name, v)
				}
			}
		}
	})
	return err
}

// otherEnv are IDGEN_ variables that are no flag but are read by
// something else: the README's client snippet (IDGEN_TOKEN), the compose
// file, the tests, simulations and CI (otherEnvPrefixes too).
var otherEnv = map[string]bool{"IDGEN_TOKEN": true, "IDGEN_REQUIRE_DOCKER": true, "IDGEN_TOOLS_DIR": true, "IDGEN_DEBIAN_MIRROR": true,
	"IDGEN_IMAGE": true, "IDGEN_PUBLISH_ADDR": true, "IDGEN_SEGMENT_PORT": true, "IDGEN_SNOWFLAKE_PORT": true, "IDGEN_MYSQL_PORT": true,
	"IDGEN_CLUSTER_PROFILE": true, "IDGEN_FLOOD_TAGS": true, "IDGEN_RELIABILITY_WRITE": true, "IDGEN_SCALEOUT_SECONDS": true, "IDGEN_WORKER_RANGE": true}

var otherEnvPrefixes = []string{"IDGEN_TEST_", "IDGEN_SIM_", "IDGEN_FAULT_"}

// unknownEnv returns a warning for each IDGEN_ variable of env that is no
// flag of any idgen command: a typo (IDGEN_ADMIN_TOKN) would otherwise
// leave its setting off in silence. It names the closest flag's variable.
func unknownEnv(cmd *cobra.Command, env []string) []string {
	known := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.Flags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) { known[envName(f.Name)] = true })
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(cmd.Root())
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "IDGEN_") || known[name] || otherEnv[name] ||
			slices.ContainsFunc(otherEnvPrefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		// Suggest only near misses: one edit per four letters of the name.
		best, dist := "", max(1, (len(name)-len("IDGEN_"))/4)+1
		for k := range known {
			if d := editDistance(name, k); d < dist || (d == dist && k < best) {
				best, dist = k, d
			}
		}
		w := name + " is set but is no idgen setting, so it is ignored"
		if best != "" {
			w += "; did you mean " + best + "?"
		}
		out = append(out, w)
	}
	slices.Sort(out)
	return out
}

// envName is the environment variable of a flag.
func envName(flag string) string {
	return "IDGEN_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// rePackage finds the package names that Go errors start with ("segment:
// ", "readable: "), at the start of the message or of a wrapped part.
// They name code, not anything a user of the command knows; the
// database's name (postgres:, mysql:, sqlite:) stays, since it says which
// store answered.
var rePackage = regexp.MustCompile(`(^|: )(?:idgen|segment|readable|snowflake|opaque|idempotency|server|client|store|sqlstore|fence): `)

// cliMessage is err as the command prints it: one "idgen: " in front, no
// package names inside.
func cliMessage(err error) string {
	msg := err.Error()
	for {
		plain := rePackage.ReplaceAllString(msg, "$1")
		if plain == msg {
			break
		}
		msg = plain
	}
	return "idgen: " + msg
}

// plainError is an error whose text is written for the command's user,
// and that still matches its cause with errors.Is.
type plainError struct {
	msg   string
	cause error
}

func (e *plainError) Error() string { return e.msg }
func (e *plainError) Unwrap() error { return e.cause }
