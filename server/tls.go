package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TLSFiles names the PEM files of a TLS listener: its certificate chain
// and key, and optionally the CA bundle that client certificates must
// chain to (mutual TLS).
type TLSFiles struct {
	Cert, Key string
	// ClientCA, when set, checks the certificate a client presents
	// against its CAs at the handshake: a certificate it did not sign is
	// refused there. A client without a certificate completes the
	// handshake, so that probes reach /healthz, /readyz and
	// grpc.health.v1; every other route refuses it (Config.RequireClientCert).
	ClientCA string
}

// CipherSuites are the TLS 1.2 suites a listener accepts: Mozilla's
// intermediate profile, ECDHE key exchange with an AEAD cipher (AES-GCM or
// ChaCha20-Poly1305) only. The CBC suites with SHA-1 MACs and the suites
// without forward secrecy (TLS_RSA_*) that crypto/tls would otherwise
// still accept are left out. TLS 1.3 suites are not configurable in
// crypto/tls and are all AEAD. It returns a new slice on each call.
func CipherSuites() []uint16 {
	return []uint16{
		tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
		tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	}
}

// Errors of TLSConfig.
var (
	ErrTLSFiles = errors.New("server: TLS needs both a certificate and a key file")
)

// TLSConfig returns the tls.Config of a listener serving files. It reads
// them now, and fails if they do not make a valid certificate and key or
// CA bundle. Later it looks at the files' modification times and sizes
// at every handshake and reads them again when one changed, as when
// cert-manager or a Kubernetes Secret volume rotates them: new
// connections get the new certificate without a restart; connections
// already open keep theirs. Files that fail to load (a key not yet
// written beside a new certificate) are logged and the last good ones
// stay in use, so a rotation can never take the listener down.
//
// The config offers HTTP/2 and HTTP/1.1 by ALPN, TLS 1.2 at least, and
// in TLS 1.2 only CipherSuites.
func TLSConfig(files TLSFiles, log *slog.Logger) (*tls.Config, error) {
	if files.Cert == "" || files.Key == "" {
		return nil, ErrTLSFiles
	}
	if log == nil {
		log = slog.Default()
	}
	r := &certReloader{files: files, log: log}
	stamps := r.stamps()
	cfg, err := r.load()
	if err != nil {
		return nil, err
	}
	r.cur, r.seen = cfg, stamps
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		CipherSuites:       CipherSuites(),
		NextProtos:         []string{"h2", "http/1.1"},
		GetConfigForClient: r.config,
	}, nil
}

// certReloader holds the current per-connection config and the stamps of
// the files it was read from, or last tried.
type certReloader struct {
	files TLSFiles
	log   *slog.Logger

	mu   sync.Mutex
	seen [3]fileStamp
	cur  *tls.Config
}

type fileStamp struct {
	mod  time.Time
	size int64
	ok   bool
}

func (r *certReloader) paths() [3]string {
	return [3]string{r.files.Cert, r.files.Key, r.files.ClientCA}
}

// stamps stats the files; os.Stat follows the symlinks a Secret volume
// swaps on rotation.
func (r *certReloader) stamps() [3]fileStamp {
	var out [3]fileStamp
	for i, p := range r.paths() {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil {
			out[i] = fileStamp{fi.ModTime(), fi.Size(), true}
		}
	}
	return out
}

func (r *certReloader) config(*tls.ClientHelloInfo) (*tls.Config, error) {
	now := r.stamps()
	r.mu.Lock()
	defer r.mu.Unlock()
	if now != r.seen {
		r.seen = now
		if cfg, err := r.load(); err != nil {
			r.log.Warn("TLS files changed but do not load; serving the previous certificate", "err", err)
		} else {
			r.cur = cfg
			r.log.Info("TLS certificate reloaded", "cert", r.files.Cert, "not_after", cfg.Certificates[0].Leaf.NotAfter)
		}
	}
	return r.cur, nil
}

// load reads the files into a complete per-connection config.
func (r *certReloader) load() (*tls.Config, error) {
	// The operator names the files on the command line; reading them is
	// the point.
	cert, err := tls.LoadX509KeyPair(r.files.Cert, r.files.Key)
	if err != nil {
		return nil, fmt.Errorf("server: TLS certificate %s and key %s: %w", r.files.Cert, r.files.Key, err)
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		CipherSuites: CipherSuites(),
		NextProtos:   []string{"h2", "http/1.1"},
		Certificates: []tls.Certificate{cert},
	}
	if r.files.ClientCA != "" {
		pem, err := os.ReadFile(r.files.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("server: TLS client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("server: TLS client CA %s holds no PEM certificate", r.files.ClientCA)
		}
		cfg.ClientCAs = pool
		// Verified if given, required by the handler: a probe has no
		// certificate, and the kubelet's HTTPS probes cannot send one.
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

// WatchTLS makes idgen_tls_cert_expiry_timestamp_seconds report the
// expiry of the certificate cfg (from TLSConfig) serves. Each scrape also
// looks for rotated files, as a handshake does, so a certificate renewed
// on an idle listener shows at the next scrape.
func (m *Metrics) WatchTLS(cfg *tls.Config) { m.tls.Store(cfg) }

func (m *Metrics) tlsExpiryGauge() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "idgen", Name: "tls_cert_expiry_timestamp_seconds",
		Help: "Unix time at which the listener's TLS certificate expires; 0 without TLS (--tls-cert)."},
		func() float64 {
			cfg := m.tls.Load()
			if cfg == nil || cfg.GetConfigForClient == nil {
				return 0
			}
			cur, err := cfg.GetConfigForClient(nil)
			if err != nil || cur == nil || len(cur.Certificates) == 0 || cur.Certificates[0].Leaf == nil {
				return 0
			}
			return float64(cur.Certificates[0].Leaf.NotAfter.Unix())
		})
}
