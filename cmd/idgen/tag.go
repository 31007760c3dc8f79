package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/idgen/idgen/segment"
)

func newTag() *cobra.Command {
	tag := &cobra.Command{Use: "tag", Short: "Manage segment tags (rows of id_sequence)"}

	add := &cobra.Command{
		Use:   "add TAG",
		Short: "Create a tag",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			step, _ := cmd.Flags().GetInt64("step")
			start, _ := cmd.Flags().GetInt64("start")
			desc, _ := cmd.Flags().GetString("description")
			return withStore(cmd, func(st backend) error {
				err := st.CreateTag(cmd.Context(), segment.Tag{Name: args[0], MaxID: start, Step: step, Description: desc})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "created %s: first ID %d, step %d\n", args[0], start, step)
				return nil
			})
		},
	}
	add.Flags().Int64("step", 1000, "IDs reserved per database round trip (at least; the step grows with traffic)")
	add.Flags().Int64("start", 1, "first ID the tag hands out")
	add.Flags().String("description", "", "free text shown in listings")

	list := &cobra.Command{
		Use:   "list",
		Short: "List tags",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd, func(st backend) error {
				tags, err := st.ListTags(cmd.Context())
				if err != nil {
					return err
				}
				w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "TAG\tNEXT FREE ID\tSTEP\tUPDATED\tDESCRIPTION")
				for _, t := range tags {
					fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\n", t.Name, t.MaxID, t.Step, t.UpdatedAt.UTC().Format(time.RFC3339), t.Description)
				}
				return w.Flush()
			})
		},
	}

	step := &cobra.Command{
		Use:   "step TAG STEP",
		Short: "Change a tag's step; running servers use it from their next reservation",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var n int64
			if _, err := fmt.Sscan(args[1], &n); err != nil {
				return fmt.Errorf("%w: %q is not a number", segment.ErrInvalidStep, args[1])
			}
			return withStore(cmd, func(st backend) error {
				if err := st.SetStep(cmd.Context(), args[0], n); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: step %d\n", args[0], n)
				return nil
			})
		},
	}
	tag.AddCommand(add, list, step)
	return tag
}

// withStore opens and migrates the store, runs fn, and closes the store.
func withStore(cmd *cobra.Command, fn func(st backend) error) error {
	ctx := cmd.Context()
	st, err := openStore(ctx, storeDSN(cmd))
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.Migrate(ctx, nil); err != nil {
		return err
	}
	return fn(st)
}
