package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/idgen/idgen/opaque"
	"github.com/idgen/idgen/segment"
)

// opaqueKeyFlags adds the flags that name the opaque-ID key. The docs
// show the file and the environment variable only: a key on the command
// line is visible to every user of the machine in its process list.
func opaqueKeyFlags(f *pflag.FlagSet) {
	f.String("opaque-key-file", "", "file holding the opaque-ID key: 16, 24 or 32 bytes in hex or base64 (idgen opaque keygen writes one); the same on every instance")
	f.String("opaque-key", "", "the opaque-ID key itself; prefer the environment (IDGEN_OPAQUE_KEY) or --opaque-key-file, which stay out of process listings")
}

// readOpaqueKey returns the key the flags name, or nil when they name
// none. Errors name the flag and the file, never the key.
func readOpaqueKey(cmd *cobra.Command) (*opaque.Key, error) {
	file, _ := cmd.Flags().GetString("opaque-key-file")
	inline, _ := cmd.Flags().GetString("opaque-key")
	switch {
	case file != "" && inline != "":
		return nil, errors.New("--opaque-key-file and --opaque-key (IDGEN_OPAQUE_KEY) both set: give the key once")
	case file != "":
		b, err := os.ReadFile(file) //nolint:gosec // G304: the operator names the key file
		if err != nil {
			return nil, fmt.Errorf("--opaque-key-file: %w", err)
		}
		k, err := opaque.ParseKey(string(b))
		if err != nil {
			return nil, fmt.Errorf("--opaque-key-file %s: %w", file, err)
		}
		return k, nil
	case inline != "":
		k, err := opaque.ParseKey(inline)
		if err != nil {
			return nil, fmt.Errorf("--opaque-key (IDGEN_OPAQUE_KEY): %w", err)
		}
		return k, nil
	}
	return nil, nil
}

func newOpaque() *cobra.Command {
	cmd := &cobra.Command{Use: "opaque", Short: "Keys and decoding of opaque IDs (tags created with --opaque)"}
	keygen := &cobra.Command{
		Use:   "keygen",
		Short: "Print a new random opaque-ID key (32 bytes, hex) for --opaque-key-file",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			raw := make([]byte, 32)
			if _, err := rand.Read(raw); err != nil {
				return err
			}
			k, err := opaque.NewKey(raw)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", hex.EncodeToString(raw))
			if err == nil {
				_, err = fmt.Fprintf(cmd.ErrOrStderr(), "fingerprint %s\n", k.Fingerprint())
			}
			return err
		},
	}
	decode := &cobra.Command{
		Use:   "decode TAG ID",
		Short: "Print the counter behind an opaque ID of TAG (needs the tag's key)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := readOpaqueKey(cmd)
			if err != nil {
				return err
			}
			if k == nil {
				return errors.New("decoding needs the key: pass --opaque-key-file or set IDGEN_OPAQUE_KEY")
			}
			id, err := strconv.ParseInt(args[1], 10, 64)
			if err != nil || id < 1 {
				return fmt.Errorf("%q is not an opaque ID: a whole number from 1 to 9223372036854775807", args[1])
			}
			counter, err := k.Decode(args[0], id)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "tag %s, ID %d: counter %d (key %s)\n", args[0], id, counter, k.Fingerprint())
			return err
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
	k, err := readOpaqueKey(cmd)
	if err != nil {
		return "", err
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

// readServeOpaque reads serve's key and --auto-create-opaque, and returns
// the key and the fingerprint auto-created tags get ("" for plain).
func readServeOpaque(cmd *cobra.Command) (*opaque.Key, string, error) {
	k, err := readOpaqueKey(cmd)
	if err != nil {
		return nil, "", err
	}
	auto, _ := cmd.Flags().GetBool("auto-create-opaque")
	if !auto {
		return k, "", nil
	}
	if k == nil {
		return nil, "", errors.New("--auto-create-opaque needs the opaque key: pass --opaque-key-file or set IDGEN_OPAQUE_KEY")
	}
	return k, k.Fingerprint(), nil
}

// opaqueKeyName is the key's fingerprint, or "none": what logs may show.
func opaqueKeyName(k *opaque.Key) string {
	if k == nil {
		return "none"
	}
	return k.Fingerprint()
}
