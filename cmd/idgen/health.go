package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/idgen/idgen/readable"
)

// newHealth is a probe for images without curl: it exits 0 only when the
// URL answers 200.
func newHealth() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Exit 0 if the URL answers 200 (container health checks)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			url, _ := cmd.Flags().GetString("url")
			timeout, _ := cmd.Flags().GetDuration("timeout")
			req, err := http.NewRequestWithContext(cmd.Context(), http.MethodGet, url, nil)
			if err != nil {
				return err
			}
			resp, err := (&http.Client{Timeout: timeout}).Do(req)
			if err != nil {
				return err
			}
			defer func() { _ = resp.Body.Close() }() // only the status is read
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s answered %s", url, resp.Status)
			}
			return nil
		},
	}
	cmd.Flags().String("url", "http://127.0.0.1:8080/readyz", "URL to probe")
	cmd.Flags().Duration("timeout", 3*time.Second, "give up after this long")
	return cmd
}

// newDecode prints what an ID is made of: a snowflake ID's time, worker
// and sequence, or a prefixed ID's tag and number.
func newDecode() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "decode ID",
		Short: "Decode a snowflake ID (time, worker, sequence) or a prefixed ID (tag, number)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out any
			if n, err := strconv.ParseInt(args[0], 10, 64); err == nil {
				layout, err := readLayout(cmd)
				if err != nil {
					return err
				}
				p, err := layout.Decode(n)
				if err != nil {
					return err
				}
				m := map[string]any{"id": args[0], "time": p.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
					"unix_ms": p.Time.UnixMilli(), "worker_id": p.WorkerID, "sequence": p.Sequence}
				// No ID is made in the future: such a time means the ID was
				// made with another layout or epoch, and every part is wrong.
				if ahead := time.Until(p.Time); ahead > time.Minute {
					m["warning"] = fmt.Sprintf("this time is %.0f days in the future: the ID was made with another layout or epoch; "+
						"decode it with the --snowflake-layout (and --snowflake-epoch) of the service that made it", ahead.Hours()/24)
					if _, err := fmt.Fprintln(cmd.ErrOrStderr(), "idgen: warning:", m["warning"]); err != nil {
						return err
					}
				}
				out = m
			} else {
				tag, id, err := readable.Decode(args[0])
				if err != nil {
					return fmt.Errorf("%q is neither a snowflake ID nor a prefixed ID: %w", args[0], err)
				}
				out = map[string]any{"tag": tag, "id": strconv.FormatInt(id, 10)}
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			return enc.Encode(out)
		},
	}
	layoutFlags(cmd.Flags())
	return cmd
}
