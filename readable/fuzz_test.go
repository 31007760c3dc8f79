package readable_test

import (
	"errors"
	"math"
	"testing"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/readable"
)

func FuzzRoundTrip(f *testing.F) {
	for _, v := range vectors {
		f.Add(v.tag, v.id)
		f.Add(v.want, -v.id)
	}
	f.Add("", int64(0))
	f.Add("a b", int64(1))
	f.Add("x_", int64(math.MinInt64))
	f.Fuzz(func(t *testing.T, tag string, id int64) {
		s, err := readable.Encode(tag, id)
		switch {
		case !idgen.ValidTag(tag):
			if !errors.Is(err, readable.ErrInvalidTag) || s != "" {
				t.Fatalf("Encode(%q, %d) = %q, %v; want ErrInvalidTag", tag, id, s, err)
			}
		case id < 0:
			if !errors.Is(err, readable.ErrNegativeID) || s != "" {
				t.Fatalf("Encode(%q, %d) = %q, %v; want ErrNegativeID", tag, id, s, err)
			}
		default:
			if err != nil || len(s) > readable.MaxLen {
				t.Fatalf("Encode(%q, %d) = %q (%d bytes), %v", tag, id, s, len(s), err)
			}
			gotTag, gotID, err := readable.Decode(s)
			if err != nil || gotTag != tag || gotID != id {
				t.Fatalf("Decode(Encode(%q, %d) = %q) = %q, %d, %v", tag, id, s, gotTag, gotID, err)
			}
		}

		// The tag-ish string as a candidate readable ID: rejected with
		// ErrInvalid, or accepted only if Encode writes exactly it.
		gotTag, gotID, err := readable.Decode(tag)
		if err != nil {
			if !errors.Is(err, readable.ErrInvalid) {
				t.Fatalf("Decode(%q) error %v is not ErrInvalid", tag, err)
			}
			return
		}
		if back, err := readable.Encode(gotTag, gotID); err != nil || back != tag {
			t.Fatalf("Decode(%q) = %q, %d but Encode gives %q, %v", tag, gotTag, gotID, back, err)
		}
	})
}

func FuzzDecodeCorrupted(f *testing.F) {
	f.Add("order", int64(123456789), uint8(0), byte('x'), false)
	f.Add("order", int64(123456789), uint8(5), byte('x'), false)
	f.Add("order", int64(123456789), uint8(11), byte(0), true)
	f.Add("a_b", int64(42), uint8(3), byte('_'), true)
	f.Add("__", int64(math.MaxInt64), uint8(200), byte(0xff), false)
	f.Add("", int64(-1), uint8(1), byte('1'), true)
	f.Fuzz(func(t *testing.T, tag string, id int64, pos uint8, c byte, swap bool) {
		// Any fuzz input stands for some valid ID.
		if !idgen.ValidTag(tag) {
			tag = "t"
		}
		id &= math.MaxInt64
		s, err := readable.Encode(tag, id)
		if err != nil {
			t.Fatalf("Encode(%q, %d): %v", tag, id, err)
		}
		b := []byte(s)
		i := int(pos) % len(b)
		if swap {
			if i == len(b)-1 {
				i--
			}
			b[i], b[i+1] = b[i+1], b[i]
		} else {
			b[i] = c
		}
		corrupted := string(b)
		gotTag, gotID, err := readable.Decode(corrupted)
		if corrupted == s {
			if err != nil || gotTag != tag || gotID != id {
				t.Fatalf("Decode(%q) = %q, %d, %v; want %q, %d", s, gotTag, gotID, err, tag, id)
			}
			return
		}
		if !errors.Is(err, readable.ErrInvalid) {
			t.Fatalf("Decode(%q), corrupted from %q, = %q, %d, %v; want ErrInvalid", corrupted, s, gotTag, gotID, err)
		}
	})
}
