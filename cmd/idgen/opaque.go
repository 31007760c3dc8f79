package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/idgen/idgen/opaque"
	"github.com/idgen/idgen/readable"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/store"
)

// opaqueKeyFlags adds the flags that name the opaque-ID key: the file,
// or the environment variable IDGEN_OPAQUE_KEY. --opaque-key is hidden
// and refused on the command line, where every user of the machine reads
// it in the process list; it exists so that IDGEN_OPAQUE_KEY maps onto it
// as every IDGEN_<FLAG> does.
func opaqueKeyFlags(f *pflag.FlagSet) {
	f.String("opaque-key-file", "", "file holding the opaque-ID key: 16, 24 or 32 bytes in hex or base64 (idgen opaque keygen --out writes one, mode 0600); the same on every instance")
	f.String("opaque-key", "", "the opaque-ID key itself, from the environment only (IDGEN_OPAQUE_KEY)")
	_ = f.MarkHidden("opaque-key")
}

// errKeyOnCommandLine refuses --opaque-key given as a flag.
var errKeyOnCommandLine = errors.New("--opaque-key on the command line is refused: every user of the machine can read it in the process list; put the key in a file (idgen opaque keygen --out FILE) and pass --opaque-key-file, or set IDGEN_OPAQUE_KEY")

// readOpaqueKey returns the key the flags name, or nil when they name
// none, and a warning to log when the key file is readable by its group.
// A key file others can read is refused. Errors name the flag and the
// file, never the key.
func readOpaqueKey(cmd *cobra.Command) (*opaque.Key, string, error) {
	if cmd.Flags().Changed("opaque-key") {
		// flagsFromEnv sets the value without marking the flag changed,
		// so only the command line gets here.
		return nil, "", errKeyOnCommandLine
	}
	file, _ := cmd.Flags().GetString("opaque-key-file")
	inline, _ := cmd.Flags().GetString("opaque-key")
	switch {
	case file != "" && inline != "":
		return nil, "", errors.New("--opaque-key-file and IDGEN_OPAQUE_KEY both set: give the key once")
	case file != "":
		warning, err := checkKeyFileMode(file)
		if err != nil {
			return nil, "", err
		}
		b, err := os.ReadFile(file) //nolint:gosec // G304: the operator names the key file
		if err != nil {
			return nil, "", fmt.Errorf("--opaque-key-file: %w", err)
		}
		k, err := opaque.ParseKey(string(b))
		if err != nil {
			return nil, "", fmt.Errorf("--opaque-key-file %s: %w", file, err)
		}
		return k, warning, nil
	case inline != "":
		k, err := opaque.ParseKey(inline)
		if err != nil {
			return nil, "", fmt.Errorf("IDGEN_OPAQUE_KEY: %w", err)
		}
		return k, "", nil
	}
	return nil, "", nil
}

// checkKeyFileMode refuses a key file that others can read, as ssh
// refuses such a private key: anyone who reads the key decodes every
// opaque ID to its counter. A file its group can read is allowed, the
// usual root:idgen 0640, with a warning. (A Kubernetes secret volume
// mounts files 0644 unless its defaultMode says 0400 or 0440.)
func checkKeyFileMode(file string) (warning string, err error) {
	fi, err := os.Stat(file)
	if err != nil {
		return "", fmt.Errorf("--opaque-key-file: %w", err)
	}
	mode := fi.Mode().Perm()
	switch {
	case mode&0o004 != 0:
		return "", fmt.Errorf("--opaque-key-file %s is readable by every user (mode %04o): run chmod 600 %s (in Kubernetes, mount the secret with defaultMode 0400)", file, mode, file)
	case mode&0o040 != 0:
		return fmt.Sprintf("--opaque-key-file %s is readable by its group (mode %04o): every member can decode opaque IDs; chmod 600 it unless that is meant", file, mode), nil
	}
	return "", nil
}

// writeKeyFile creates file holding key, mode 0600, and fails if it
// exists: a new key over an old one would make the old key's tags
// undecodable, and their IDs collide with the new key's.
func writeKeyFile(file, key string) error {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600) //nolint:gosec // G304: the operator names the key file
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if _, err := f.WriteString(key + "\n"); err != nil {
		_ = f.Close()
		_ = os.Remove(file)
		return fmt.Errorf("--out: %w", err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(file)
		return fmt.Errorf("--out: %w", err)
	}
	return nil
}

func newOpaque() *cobra.Command {
	cmd := &cobra.Command{Use: "opaque", Short: "Keys and decoding of opaque IDs (tags created with --opaque)"}
	keygen := &cobra.Command{
		Use:   "keygen",
		Short: "Make a new random opaque-ID key (32 bytes, hex) for --opaque-key-file",
		Long: `Make a new random opaque-ID key (32 bytes, hex). With --out FILE it
creates FILE, mode 0600, and refuses to overwrite one; without, it
prints the key on standard output. The key's fingerprint goes to
standard error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			raw := make([]byte, 32)
			if _, err := rand.Read(raw); err != nil {
				return err
			}
			k, err := opaque.NewKey(raw)
			if err != nil {
				return err
			}
			if out, _ := cmd.Flags().GetString("out"); out != "" {
				err = writeKeyFile(out, hex.EncodeToString(raw))
			} else {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", hex.EncodeToString(raw))
			}
			if err == nil {
				_, err = fmt.Fprintf(cmd.ErrOrStderr(), "fingerprint %s\n", k.Fingerprint())
			}
			return err
		},
	}
	keygen.Flags().String("out", "", "create this file (mode 0600, never overwritten) instead of printing the key")
	decode := &cobra.Command{
		Use:   "decode TAG ID",
		Short: "Print the counter behind an opaque ID of TAG, decimal or prefixed (needs the tag's key and the store)",
		Long: `Print the counter behind an opaque ID of TAG, decimal or prefixed
(TAG_…). The tag is read from --store: a tag that does not exist, or is
not opaque, is an error rather than a made-up counter, and a counter at
or above the tag's max_id is flagged as never issued (and the exit status is 1).`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, warning, err := readOpaqueKey(cmd)
			if err != nil {
				return err
			}
			if warning != "" {
				_, _ = fmt.Fprintln(cmd.ErrOrStderr(), "warning: "+warning)
			}
			if k == nil {
				return errors.New("decoding needs the key: pass --opaque-key-file or set IDGEN_OPAQUE_KEY")
			}
			tag := args[0]
			id, err := parseOpaqueArg(tag, args[1])
			if err != nil {
				return err
			}
			return withExistingStore(cmd, func(st *store.Store) error {
				t, err := findStoreTag(cmd.Context(), st, tag)
				if err != nil {
					return err
				}
				d, err := k.DecodeTag(t, id)
				if err != nil {
					return err
				}
				if !d.Issued {
					_, _ = fmt.Fprintf(cmd.OutOrStdout(), "tag %s, ID %d: counter %d, at or above max_id %d: never issued (key %s)\n", tag, id, d.Counter, t.MaxID, d.Fingerprint)
					return errNeverIssued
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "tag %s, ID %d: counter %d (key %s)\n", tag, id, d.Counter, d.Fingerprint)
				return err
			})
		},
	}
	opaqueKeyFlags(decode.Flags())
	cmd.AddCommand(keygen, decode)
	return cmd
}

// opaqueTag sets t.Opaque from tag add's --opaque and key flags, and
// returns how to name the tag's kind in the answer.
func opaqueTag(cmd *cobra.Command, t *segment.Tag) (string, error) {
	if on, _ := cmd.Flags().GetBool("opaque"); !on {
		return "", nil
	}
	k, warning, err := readOpaqueKey(cmd)
	if err != nil {
		return "", err
	}
	if warning != "" {
		_, _ = fmt.Fprintln(cmd.ErrOrStderr(), "warning: "+warning)
	}
	if table, _ := cmd.Flags().GetString("sequence-table"); table == store.LeafAlloc {
		return "", errors.New("--opaque is refused with --sequence-table leaf_alloc: Leaf's servers would hand out the tag's raw counters")
	}
	if k == nil {
		return "", errors.New("--opaque needs the key the servers hold: pass --opaque-key-file or set IDGEN_OPAQUE_KEY")
	}
	t.Opaque = k.Fingerprint()
	return " (opaque, key " + t.Opaque + ")", nil
}

// opaqueColumn is tag list's OPAQUE column: the key's fingerprint, or "-".
func opaqueColumn(t segment.Tag) string {
	if t.Opaque == "" {
		return "-"
	}
	return t.Opaque
}

// serveOpaque is what serve reads of the opaque flags.
type serveOpaque struct {
	key     *opaque.Key // nil: opaque tags are refused
	auto    string      // the fingerprint auto-created tags get, "" for plain
	warning string      // about the key file's mode, to log
}

// readServeOpaque reads serve's key and --auto-create-opaque, and checks
// them against the flags they depend on before the store is touched:
//   - a key needs --metrics-token: /metrics counts every tag's IDs, and
//     an opaque tag exists to hide its count, so an anonymous scrape
//     must not see it (docs/operations.md);
//   - --sequence-table leaf_alloc takes no key: Leaf's servers hand out
//     the raw counters of the same rows, and Leaf's own DDL makes
//     biz_tag case-insensitive, so /id/ORDER would reach order's row.
func readServeOpaque(cmd *cobra.Command, metricsToken string) (serveOpaque, error) {
	k, warning, err := readOpaqueKey(cmd)
	if err != nil {
		return serveOpaque{}, err
	}
	auto, _ := cmd.Flags().GetBool("auto-create-opaque")
	if table, _ := cmd.Flags().GetString("sequence-table"); table == store.LeafAlloc && (k != nil || auto) {
		return serveOpaque{}, errors.New("opaque tags are refused with --sequence-table leaf_alloc: Leaf's servers hand out the same rows' raw counters, and Leaf's case-insensitive biz_tag lets /id/ORDER reach order's row; serve opaque tags from idgen's own id_sequence table (no --opaque-key-file, IDGEN_OPAQUE_KEY or --auto-create-opaque here)")
	}
	if k != nil && metricsToken == "" {
		return serveOpaque{}, errors.New("an opaque key needs --metrics-token (IDGEN_METRICS_TOKEN): /metrics counts each tag's IDs, the very number an opaque tag hides, and is open without a token")
	}
	if !auto {
		return serveOpaque{key: k, warning: warning}, nil
	}
	if k == nil {
		return serveOpaque{}, errors.New("--auto-create-opaque needs the opaque key: pass --opaque-key-file or set IDGEN_OPAQUE_KEY")
	}
	return serveOpaque{key: k, auto: k.Fingerprint(), warning: warning}, nil
}

// opaqueKeyName is the key's fingerprint, or "none": what logs may show.
func opaqueKeyName(k *opaque.Key) string {
	if k == nil {
		return "none"
	}
	return k.Fingerprint()
}

// errNeverIssued is opaque decode's answer to an ID whose counter no
// instance reserved.
var errNeverIssued = errors.New("the ID was never issued: its counter is at or above the tag's max_id (a typo, a guess, or another tag's ID)")

// parseOpaqueArg reads an ID of tag, decimal or prefixed.
func parseOpaqueArg(tag, s string) (int64, error) {
	if id, err := strconv.ParseInt(s, 10, 64); err == nil && id >= 1 {
		return id, nil
	}
	of, id, err := readable.Decode(s)
	switch {
	case err == nil && of != tag:
		return 0, fmt.Errorf("%q is an ID of tag %q, not of %q", s, of, tag)
	case err != nil || id < 1:
		return 0, fmt.Errorf("%q is not an opaque ID: a whole number from 1 to 9223372036854775807, or its prefixed form %s_…", s, tag)
	}
	return id, nil
}

// findStoreTag reads one tag from st: the store, not the command line,
// says whether it exists and is opaque.
func findStoreTag(ctx context.Context, st *store.Store, tag string) (segment.Tag, error) {
	tags, err := st.ListTags(ctx)
	if err != nil {
		return segment.Tag{}, err
	}
	for _, t := range tags {
		if t.Name == tag {
			return t, nil
		}
	}
	return segment.Tag{}, fmt.Errorf("%w: %q is not in --store", segment.ErrTagNotFound, tag)
}

// leafTags is opaque.Tags under --sequence-table leaf_alloc, where
// opaque tags are refused (readServeOpaque): a tag with a tag_opaque row
// is refused rather than served raw, its IDs never mixed with counters.
// The row is matched case-insensitively, as Leaf's own DDL makes MySQL
// match biz_tag, so that /id/ORDER, which reserves from order's row, is
// refused too, while tag_opaque itself is ascii_bin.
type leafTags struct{ st *store.Store }

func (l leafTags) TagOpaque(ctx context.Context, tag string) (string, error) {
	if _, err := l.st.TagOpaque(ctx, tag); err != nil {
		return "", err
	}
	rows, err := l.st.OpaqueRows(ctx)
	if err != nil {
		return "", err
	}
	for name := range rows {
		if strings.EqualFold(name, tag) {
			return "", fmt.Errorf("%w: tag %q reserves from the leaf_alloc row that tag_opaque marks opaque as %q, and --sequence-table leaf_alloc serves no opaque tags; serve it from idgen's own id_sequence table", opaque.ErrRefused, tag, name)
		}
	}
	return "", nil
}
