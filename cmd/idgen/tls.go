package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/pflag"

	"github.com/idgen/idgen/server"
)

// tlsFlags adds the TLS flags of serve: one listener serves HTTP and
// gRPC, so one certificate covers both.
func tlsFlags(f *pflag.FlagSet) {
	f.String("tls-cert", "", "PEM certificate chain: serve HTTP and gRPC over TLS on --addr (needs --tls-key; reloaded when the file changes)")
	f.String("tls-key", "", "PEM private key of --tls-cert (reloaded when the file changes)")
	f.String("tls-client-ca", "", "PEM CA bundle: require client certificates signed by it (mutual TLS; reloaded when the file changes)")
}

func readTLSFlags(f *pflag.FlagSet) server.TLSFiles {
	var t server.TLSFiles
	t.Cert, _ = f.GetString("tls-cert")
	t.Key, _ = f.GetString("tls-key")
	t.ClientCA, _ = f.GetString("tls-client-ca")
	return t
}

// checkTLSFlags reports flag mistakes in flag terms; the files' contents
// are checked when serve builds the listener's config.
func checkTLSFlags(t server.TLSFiles) []error {
	var errs []error
	switch {
	case (t.Cert == "") != (t.Key == ""):
		errs = append(errs, fmt.Errorf("--tls-cert and --tls-key go together: give both or neither"))
	case t.ClientCA != "" && t.Cert == "":
		errs = append(errs, fmt.Errorf("--tls-client-ca needs --tls-cert and --tls-key"))
	}
	for _, p := range []struct{ flag, path string }{{"--tls-cert", t.Cert}, {"--tls-key", t.Key}, {"--tls-client-ca", t.ClientCA}} {
		if p.path == "" {
			continue
		}
		if _, err := os.Stat(p.path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.flag, err))
		}
	}
	return errs
}

// tlsMode says in the start-up line how the listener is secured.
func tlsMode(t server.TLSFiles) string {
	switch {
	case t.ClientCA != "":
		return "mutual"
	case t.Cert != "":
		return "on"
	}
	return "off"
}

// listenerTLS is the listener's TLS config, or nil for cleartext.
func listenerTLS(t server.TLSFiles, log *slog.Logger) (*tls.Config, error) {
	if t.Cert == "" {
		return nil, nil
	}
	return server.TLSConfig(t, log)
}
