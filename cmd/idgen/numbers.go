package main

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/pflag"
)

// parseWhole reads a whole number strictly: decimal digits with an
// optional sign, nothing else. fmt.Sscan stops at the first character it
// cannot use ("1e3" is 1, "5x" is 5) and pflag's integers take a base
// prefix ("0x10" is 16): a typo must be refused, not read as another
// number.
func parseWhole(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	var ne *strconv.NumError
	switch {
	case err == nil:
		return n, nil
	case errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange):
		return 0, fmt.Errorf("%q is out of range: a whole number from %d to %d", s, int64(-1<<63), int64(1<<63-1))
	default:
		return 0, fmt.Errorf("%q is not a whole number: write decimal digits only, such as 1000", s)
	}
}

// wholeFlag is an integer flag parsed by parseWhole. Its Type is pflag's
// own ("int64" or "int"), so that GetInt64 and GetInt read it.
type wholeFlag struct {
	v    int64
	kind string
}

func (f *wholeFlag) Set(s string) error {
	n, err := parseWhole(s)
	if err != nil {
		return err
	}
	if f.kind == "int" && int64(int(n)) != n {
		return fmt.Errorf("%q is out of range", s)
	}
	f.v = n
	return nil
}

func (f *wholeFlag) String() string { return strconv.FormatInt(f.v, 10) }
func (f *wholeFlag) Type() string   { return f.kind }

// int64Flag defines an int64 flag that only takes whole decimal numbers.
func int64Flag(fs *pflag.FlagSet, name string, def int64, usage string) {
	fs.Var(&wholeFlag{v: def, kind: "int64"}, name, usage)
}

// intFlag defines an int flag that only takes whole decimal numbers.
func intFlag(fs *pflag.FlagSet, name string, def int, usage string) {
	fs.Var(&wholeFlag{v: int64(def), kind: "int"}, name, usage)
}
