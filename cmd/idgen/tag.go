package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/store"
	"github.com/idgen/idgen/store/fence"
)

func newTag() *cobra.Command {
	tag := &cobra.Command{Use: "tag", Short: "Manage segment tags (rows of id_sequence)",
		SuggestionsMinimumDistance: 2,
		// Without a RunE, cobra prints the help for "tag lst" and exits 0.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return unknownCommand(cmd, args[0])
		},
	}

	add := &cobra.Command{
		Use:   "add TAG",
		Short: "Create a tag",
		Args:  oneArg("name the tag to create: idgen tag add TAG [--step N] [--start N]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			step, _ := cmd.Flags().GetInt64("step")
			start, _ := cmd.Flags().GetInt64("start")
			desc, _ := cmd.Flags().GetString("description")
			t := segment.Tag{Name: args[0], MaxID: start, Step: step, Description: desc}
			kind, err := opaqueTag(cmd, &t)
			if err != nil {
				return err
			}
			return withStore(cmd, func(st *store.Store) error {
				err := st.CreateTag(cmd.Context(), t)
				if err != nil {
					return err
				}
				first, floor := createdAt(cmd.Context(), st, t)
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "created %s%s: first ID %d, step %d%s\n", args[0], kind, first, step, floor)
				return err
			})
		},
	}
	int64Flag(add.Flags(), "step", 1000, "IDs reserved per database round trip (at least; the step grows with traffic)")
	int64Flag(add.Flags(), "start", 1, "first ID the tag hands out")
	add.Flags().String("description", "", "free text shown in listings")
	add.Flags().Bool("opaque", false, "hand out the tag's IDs encrypted under the opaque key (docs/segment.md); fixed for the tag's life")
	opaqueKeyFlags(add.Flags())

	list := &cobra.Command{
		Use:   "list",
		Short: "List tags",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withExistingStore(cmd, func(st *store.Store) error {
				tags, err := st.ListTags(cmd.Context())
				if err != nil {
					return err
				}
				p := newTable(cmd.OutOrStdout(), "TAG\tNEXT_ID\tSTEP\tUPDATED\tOPAQUE\tDESCRIPTION")
				for _, t := range tags {
					p.printf("%s\t%d\t%d\t%s\t%s\t%s\n", t.Name, t.MaxID, t.Step, t.UpdatedAt.UTC().Format(time.RFC3339), opaqueColumn(t), t.Description)
				}
				return p.end()
			})
		},
	}

	step := &cobra.Command{
		Use:   "step TAG STEP",
		Short: "Change a tag's step; running servers use it from their next reservation",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return fmt.Errorf("name the tag and its new step: idgen tag step TAG STEP (got %d arguments)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := parseWhole(args[1])
			if err != nil {
				// Not ErrInvalidStep's own text, "invalid step or start":
				// this command takes no start.
				return &plainError{"invalid step: " + err.Error(), segment.ErrInvalidStep}
			}
			return withExistingStore(cmd, func(st *store.Store) error {
				if err := st.SetStep(cmd.Context(), args[0], n); err != nil {
					return tagNotFound(args[0], err)
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s: step %d\n", args[0], n)
				return err
			})
		},
	}
	// A negative step reads as a flag to the parser: say what is wrong
	// with it rather than "unknown shorthand flag".
	step.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		var nf *pflag.NotExistError
		if errors.As(err, &nf) && isDigits(nf.GetSpecifiedShortnames()) {
			return &plainError{"invalid step: a step is a whole number of at least 1, got -" + nf.GetSpecifiedShortnames(), segment.ErrInvalidStep}
		}
		return err
	})
	tag.AddCommand(add, list, step, newBump())
	return tag
}

// createdAt returns the first ID of the tag t just created, and a note
// when it is not t.MaxID: on a store that was fenced or bumped, a tag
// starts the tag floor above its --start (docs/deploy.md). Without a
// record to read (no fencing), it is t.MaxID.
func createdAt(ctx context.Context, st *store.Store, t segment.Tag) (int64, string) {
	_, rec, err := st.Identity(ctx)
	if err != nil || rec.Floor <= 0 {
		return t.MaxID, ""
	}
	return fence.Start(rec, t.MaxID), fmt.Sprintf(" (--start %d plus the store's tag floor %d: the store was fenced or bumped)", t.MaxID, rec.Floor)
}

// tagNotFound says how to create a missing tag from the CLI; the
// segment error's own hint names serve's auto-create, which does not
// apply here.
func tagNotFound(tag string, err error) error {
	if errors.Is(err, segment.ErrTagNotFound) {
		return fmt.Errorf("tag not found: %q; create it with idgen tag add %s", tag, tag)
	}
	return err
}

// oneArg is cobra.ExactArgs(1) with a message that says what to pass.
func oneArg(usage string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return fmt.Errorf("%s (got %d arguments)", usage, len(args))
		}
		return nil
	}
}

// unknownCommand refuses a subcommand that does not exist, with cobra's
// suggestions, so that a typo exits non-zero.
func unknownCommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		return fmt.Errorf("%s; did you mean %q?", msg, s[0])
	}
	return errors.New(msg + "; run " + cmd.CommandPath() + " --help for the list")
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// withExistingStore is withStore for the commands that read or change
// what a store holds: they refuse a SQLite file that does not exist
// instead of creating an empty one.
func withExistingStore(cmd *cobra.Command, fn func(st *store.Store) error) error {
	if err := requireStoreFile(storeDSN(cmd)); err != nil {
		return err
	}
	return withStore(cmd, fn)
}

// withStore opens and migrates the store, runs fn, and closes the store.
func withStore(cmd *cobra.Command, fn func(st *store.Store) error) (err error) {
	ctx := cmd.Context()
	st, err := openFlagStore(ctx, cmd)
	if err != nil {
		return err
	}
	defer closeStore(st, &err)
	if _, err := st.Migrate(ctx, nil); err != nil {
		return err
	}
	return fn(st)
}

// newBump is the repair after a restore from backup or a failover to a
// replica that lost its last commits: max_id may then be below IDs that
// were handed out, and instances that restarted since cannot know it.
func newBump() *cobra.Command {
	bump := &cobra.Command{
		Use:   "bump [TAG...]",
		Short: "Move next_id up, by --by IDs or to at least --to, after a restore or a lossy failover",
		Long: `Move next_id (the NEXT_ID of idgen tag list; max_id in the database)
up so that no ID handed out before a restore or a lossy failover can be
handed out again. Never moves it down. How large
--by must be: docs/deploy.md, "Sizing idgen tag bump --by".

--all --by also moves every lock's token up by N, and raises every
snowflake worker ID's timestamp floor by the fleet's lease TTL and a
tenth, so that an instance paused through the restore is out of its
lease before its worker ID stamps again; snowflake routes answer 503
worker_floor_ahead until then (docs/fencing.md).`,
		Example: "  idgen tag bump --all --by 100000000\n  idgen tag bump order --to 5000000000",
		RunE: func(cmd *cobra.Command, args []string) error {
			all, _ := cmd.Flags().GetBool("all")
			by, _ := cmd.Flags().GetInt64("by")
			to, _ := cmd.Flags().GetInt64("to")
			switch {
			case !all && len(args) == 0:
				return errors.New("name the tags to bump, or pass --all for every tag")
			case all && len(args) > 0:
				return errors.New("name tags, or pass --all, not both")
			case (by > 0) == (to > 0):
				return errors.New("pass exactly one of --by N or --to N, with N at least 1")
			case by < 0 || to < 0:
				return errors.New("--by and --to must be at least 1: next_id only moves up")
			}
			return withExistingStore(cmd, func(st *store.Store) error {
				ctx := cmd.Context()
				out := &printer{w: cmd.OutOrStdout()}
				if all && by > 0 {
					// One transaction, which raises the tag floor too, so
					// that a tag created afterwards starts above it.
					tags, err := st.BumpAll(ctx, by)
					if err != nil {
						return err
					}
					for _, t := range tags {
						out.printf("%s: next_id %d\n", t.Name, t.MaxID)
					}
					out.printf("tag floor raised by %d: tags created from now on start that far above their --start\n", by)
					out.printf("snowflake worker IDs stamp again after the fleet's lease TTL and a tenth (503 worker_floor_ahead until then)\n")
					return out.err
				}
				if all {
					tags, err := st.ListTags(ctx)
					if err != nil {
						return err
					}
					for _, t := range tags {
						args = append(args, t.Name)
					}
				}
				for _, name := range args {
					if by > 0 {
						n, err := st.Bump(ctx, name, by)
						if err != nil {
							return tagNotFound(name, err)
						}
						out.printf("%s: next_id %d\n", name, n)
						continue
					}
					raised, err := st.Raise(ctx, name, to)
					if err != nil {
						return tagNotFound(name, err)
					}
					if raised {
						out.printf("%s: next_id %d\n", name, to)
					} else {
						out.printf("%s: already at or above %d\n", name, to)
					}
				}
				return out.err
			})
		},
	}
	bump.Flags().Bool("all", false, "bump every tag")
	int64Flag(bump.Flags(), "by", 0, "skip this many IDs")
	int64Flag(bump.Flags(), "to", 0, "raise next_id to at least this")
	return bump
}
