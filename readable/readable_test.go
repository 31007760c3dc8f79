package readable_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/readable"
)

// vectors were computed by an independent implementation (Python big
// integers, check characters found by trying all 58×58 pairs).
var vectors = []struct {
	tag  string
	id   int64
	want string
}{
	{"order", 0, "order_11A"},
	{"order", 1, "order_22e"},
	{"order", 57, "order_z1G"},
	{"order", 58, "order_216M"},
	{"order", 123456789, "order_BukQL3x"},
	{"order", math.MaxInt64, "order_NQm6nKp8qFC72"},
	{"a", 0, "a_11d"},
	{"a_b", 42, "a_b_j1T"},
	{"user.profile:v2-x", 9007199254740993, "user.profile:v2-x_2DLNrMSKui3L"},
	{"_", 3364, "__2111K"},
	{strings.Repeat("T", 64), math.MaxInt64, strings.Repeat("T", 64) + "_NQm6nKp8qFC1S"},
	{"ticket", 1000000, "ticket_68GP1K"},
}

func TestEncode_Vectors(t *testing.T) {
	for _, v := range vectors {
		got, err := readable.Encode(v.tag, v.id)
		if err != nil || got != v.want {
			t.Errorf("Encode(%q, %d) = %q, %v; want %q", v.tag, v.id, got, err, v.want)
		}
	}
}

func TestDecode_Vectors(t *testing.T) {
	for _, v := range vectors {
		tag, id, err := readable.Decode(v.want)
		if err != nil || tag != v.tag || id != v.id {
			t.Errorf("Decode(%q) = %q, %d, %v; want %q, %d", v.want, tag, id, err, v.tag, v.id)
		}
	}
}

func TestEncode_MaxLen(t *testing.T) {
	s, err := readable.Encode(strings.Repeat("x", 64), math.MaxInt64)
	if err != nil || len(s) != readable.MaxLen {
		t.Fatalf("longest ID %q (%d bytes), %v; want %d bytes", s, len(s), err, readable.MaxLen)
	}
}

func TestEncode_Errors(t *testing.T) {
	tests := []struct {
		name string
		tag  string
		id   int64
		want error
	}{
		{"negative", "order", -1, readable.ErrNegativeID},
		{"min int64", "order", math.MinInt64, readable.ErrNegativeID},
		{"empty tag", "", 1, readable.ErrInvalidTag},
		{"tag too long", strings.Repeat("x", 65), 1, readable.ErrInvalidTag},
		{"space in tag", "my order", 1, readable.ErrInvalidTag},
		{"slash in tag", "a/b", 1, readable.ErrInvalidTag},
		{"non-ASCII tag", "ordér", 1, readable.ErrInvalidTag},
		{"bad tag wins over negative", "", -1, readable.ErrInvalidTag},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := readable.Encode(tt.tag, tt.id)
			if !errors.Is(err, tt.want) || s != "" {
				t.Fatalf("Encode(%q, %d) = %q, %v; want %v", tt.tag, tt.id, s, err, tt.want)
			}
			if !errors.Is(readable.ErrInvalidTag, idgen.ErrInvalidTag) {
				t.Fatal("ErrInvalidTag is not idgen.ErrInvalidTag")
			}
		})
	}
}

func TestDecode_Rejects(t *testing.T) {
	tooBig := readable.WithCheck("order_NQm6nKp8qFD") // math.MaxInt64 + 1
	tests := []struct {
		name string
		in   string
		msg  string // part of the error message
	}{
		{"empty", "", "no '_'"},
		{"no separator", "order11A", "no '_'"},
		{"empty tag", readable.WithCheck("_2"), "tag"},
		{"tag too long", readable.WithCheck(strings.Repeat("x", 65) + "_2"), "tag"},
		{"bad tag character", readable.WithCheck("or der_2"), "tag"},
		{"nothing after separator", "order_", "too short"},
		{"only check characters", "order_1A", "too short"},
		{"zero in number", readable.WithCheck("order_20"), "not a base58"},
		{"capital O in number", readable.WithCheck("order_2O"), "not a base58"},
		{"capital I in number", readable.WithCheck("order_I2"), "not a base58"},
		{"lowercase l in check", "order_11l", "not a base58"},
		{"dash after separator", readable.WithCheck("order_2-3"), "not a base58"},
		{"non-ASCII after separator", "order_2é", "not a base58"},
		{"bad checksum", "order_11B", "bad checksum"},
		{"case folded", "ORDER_BukQL3x", "bad checksum"},
		{"leading zero digit", readable.WithCheck("order_12"), "leading zero"},
		{"zero padded zero", readable.WithCheck("order_11"), "leading zero"},
		{"max int64 plus one", tooBig, "larger than the largest int64"},
		{"twelve digits", readable.WithCheck("order_zzzzzzzzzzzz"), "larger than the largest int64"},
		{"longer than MaxLen", strings.Repeat("x", 70) + "_zzzzzzzzz", "more than"},
		{"whitespace", " order_11A", "tag"},
		{"trailing newline", "order_11A\n", "not a base58"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tag, id, err := readable.Decode(tt.in)
			if !errors.Is(err, readable.ErrInvalid) {
				t.Fatalf("Decode(%q) = %q, %d, %v; want ErrInvalid", tt.in, tag, id, err)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "readable: ") || !strings.Contains(msg, tt.msg) {
				t.Fatalf("Decode(%q) error %q; want it to start with \"readable: \" and mention %q", tt.in, msg, tt.msg)
			}
			if tag != "" || id != 0 {
				t.Fatalf("Decode(%q) = %q, %d with an error; want zero values", tt.in, tag, id)
			}
		})
	}
}

func TestDecode_TagsWithUnderscores(t *testing.T) {
	for _, tag := range []string{"_", "__", "a_", "_a", "a_b_c", "order_2", "x_11A", strings.Repeat("_", 64)} {
		for _, id := range []int64{0, 1, 58, math.MaxInt64} {
			s, err := readable.Encode(tag, id)
			if err != nil {
				t.Fatalf("Encode(%q, %d): %v", tag, id, err)
			}
			gotTag, gotID, err := readable.Decode(s)
			if err != nil || gotTag != tag || gotID != id {
				t.Fatalf("Decode(%q) = %q, %d, %v; want %q, %d", s, gotTag, gotID, err, tag, id)
			}
		}
	}
}

func TestRoundTrip_Random(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		tag := randomTag(r)
		id := r.Int64() >> r.IntN(63)
		s, err := readable.Encode(tag, id)
		if err != nil {
			t.Fatalf("Encode(%q, %d): %v", tag, id, err)
		}
		gotTag, gotID, err := readable.Decode(s)
		if err != nil || gotTag != tag || gotID != id {
			t.Fatalf("Decode(%q) = %q, %d, %v; want %q, %d", s, gotTag, gotID, err, tag, id)
		}
	}
}

// tagChars holds the 66 characters a tag may use, '_' and all base58
// digits among them.
const tagChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-"

// randomTag returns a random valid tag ("." and ".." are not).
func randomTag(r *rand.Rand) string {
	for {
		b := make([]byte, 1+r.IntN(64))
		for i := range b {
			b[i] = tagChars[r.IntN(len(tagChars))]
		}
		if s := string(b); idgen.ValidTag(s) {
			return s
		}
	}
}

// samples are encoded IDs of every tag length and of the edge values of
// the number, on which every possible single mistake is tried.
func samples(t *testing.T) []string {
	r := rand.New(rand.NewPCG(3, 4))
	ids := []int64{0, 1, 57, 58, 3363, 3364, 123456789, 1 << 62, math.MaxInt64 - 1, math.MaxInt64}
	var out []string
	for n := 1; n <= 64; n++ {
		b := make([]byte, n)
		for i := range b {
			b[i] = tagChars[r.IntN(len(tagChars))]
		}
		tag := string(b)
		for _, id := range []int64{ids[n%len(ids)], r.Int64() >> r.IntN(63)} {
			s, err := readable.Encode(tag, id)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
	}
	for _, v := range vectors {
		out = append(out, v.want)
	}
	return out
}

// TestDecode_RejectsEverySubstitution replaces each character of each
// sample by every other character that may appear in a readable ID (the
// tag characters, which include '_' and all of base58), and by a few that
// may not.
func TestDecode_RejectsEverySubstitution(t *testing.T) {
	subs := []byte(tagChars + " /+=~\x00\x7f\x80\xff")
	tried := 0
	for _, s := range samples(t) {
		b := []byte(s)
		for i := range b {
			orig := b[i]
			for _, c := range subs {
				if c == orig {
					continue
				}
				b[i] = c
				if tag, id, err := readable.Decode(string(b)); !errors.Is(err, readable.ErrInvalid) {
					t.Fatalf("Decode(%q), %q with %q at %d, = %q, %d, %v; want ErrInvalid", b, s, c, i, tag, id, err)
				}
				tried++
			}
			b[i] = orig
		}
	}
	t.Logf("%d substitutions rejected", tried)
}

// TestDecode_RejectsEveryTransposition swaps every pair of different
// characters of each sample: adjacent ones, which the check promises to
// catch, and, as the proof also covers them, those further apart.
func TestDecode_RejectsEveryTransposition(t *testing.T) {
	adjacent, distant := 0, 0
	for _, s := range samples(t) {
		b := []byte(s)
		for i := range b {
			for j := i + 1; j < len(b); j++ {
				if b[i] == b[j] {
					continue
				}
				b[i], b[j] = b[j], b[i]
				if tag, id, err := readable.Decode(string(b)); !errors.Is(err, readable.ErrInvalid) {
					t.Fatalf("Decode(%q), %q with %d and %d swapped, = %q, %d, %v; want ErrInvalid", b, s, i, j, tag, id, err)
				}
				b[i], b[j] = b[j], b[i]
				if j == i+1 {
					adjacent++
				} else {
					distant++
				}
			}
		}
	}
	t.Logf("%d adjacent and %d distant transpositions rejected", adjacent, distant)
}
