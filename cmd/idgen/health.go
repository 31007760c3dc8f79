package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/idgen/idgen/readable"
)

// newHealth is a probe for images without curl: it exits 0 only when the
// URL answers 200. Under mutual TLS /readyz answers without a client
// certificate, but an https URL needs --cacert for a private CA.
func newHealth() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Exit 0 if the URL answers 200 (container health checks)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			url, _ := f.GetString("url")
			timeout, _ := f.GetDuration("timeout")
			caFile, _ := f.GetString("cacert")
			certFile, _ := f.GetString("cert")
			keyFile, _ := f.GetString("key")
			tlsCfg, err := probeTLS(caFile, certFile, keyFile)
			if err != nil {
				return err
			}
			req, err := http.NewRequestWithContext(cmd.Context(), http.MethodGet, url, nil)
			if err != nil {
				return err
			}
			hc := &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: tlsCfg, ForceAttemptHTTP2: true}}
			resp, err := hc.Do(req)
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
	cmd.Flags().String("cacert", "", "PEM CA bundle that the server's certificate chains to (https URLs; default: the system's roots)")
	cmd.Flags().String("cert", "", "PEM client certificate, for a server with --tls-client-ca (needs --key)")
	cmd.Flags().String("key", "", "PEM private key of --cert")
	return cmd
}

// probeTLS is the TLS config of idgen health's flags.
func probeTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		// The operator names the file on the command line; reading it is
		// the point.
		pem, err := os.ReadFile(caFile) //nolint:gosec // G304, see above
		if err != nil {
			return nil, fmt.Errorf("--cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--cacert: %s holds no PEM certificate", caFile)
		}
		cfg.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("--cert and --key go together: give both or neither")
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--cert and --key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
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
			} else if isDigits(args[0]) {
				// Digits only, too large for int64: no '_' to complain of.
				return fmt.Errorf("%s is not a snowflake ID: snowflake IDs are from 0 to %d (63 bits), and prefixed IDs look like order_3MeJh4LZx", args[0], int64(math.MaxInt64))
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
