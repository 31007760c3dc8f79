package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"
)

func newMigrate() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the database schema",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			ctx := cmd.Context()
			st, err := openFlagStore(ctx, cmd)
			if err != nil {
				return err
			}
			defer closeStore(st, &err)
			v, err := st.Migrate(ctx, slog.Default())
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "schema at version %d\n", v)
			return err
		},
	}
}

func storeDSN(cmd *cobra.Command) string {
	dsn, _ := cmd.Flags().GetString("store")
	return dsn
}
