package opaque_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/idgen/idgen/opaque"
	"github.com/idgen/idgen/segment"
)

const rawKeyHex = "000102030405060708090a0b0c0d0e0f"

// v1Fingerprint is the fingerprint version 1 recorded, computed here from
// its definition rather than by the package: "ff1:" and the first 8
// bytes of HMAC-SHA256 under the raw key.
func v1Fingerprint(t *testing.T, keyHex string) string {
	t.Helper()
	raw, err := hex.DecodeString(keyHex)
	if err != nil {
		t.Fatal(err)
	}
	m := hmac.New(sha256.New, raw)
	m.Write([]byte("idgen opaque key fingerprint v1"))
	return "ff1:" + hex.EncodeToString(m.Sum(nil)[:8])
}

// New tags get the version-2 fingerprint, which is no HMAC under the raw
// key (the fingerprint's subkey is its own); a tag recorded with the
// version-1 fingerprint keeps version 1's IDs, which differ from version
// 2's, so that no counter of it is encoded anew to an ID it already
// handed out.
func TestKey_Versions(t *testing.T) {
	k := testKey(t)
	v1 := v1Fingerprint(t, rawKeyHex)
	if !strings.HasPrefix(k.Fingerprint(), "ff1v2:") || len(k.Fingerprint()) != len("ff1v2:")+16 {
		t.Fatalf("Fingerprint() = %q, want ff1v2: and 16 hex digits", k.Fingerprint())
	}
	if strings.TrimPrefix(k.Fingerprint(), "ff1v2:") == strings.TrimPrefix(v1, "ff1:") {
		t.Fatal("the version-2 fingerprint is the HMAC under the raw key: no separate subkey")
	}
	cur, err := k.Under(k.Fingerprint())
	if err != nil || cur != k {
		t.Fatalf("Under(own fingerprint) = %v, %v", cur, err)
	}
	old, err := k.Under(v1)
	if err != nil || old.Fingerprint() != v1 {
		t.Fatalf("Under(v1 fingerprint) = %v, %v", old, err)
	}
	same := 0
	for c := int64(1); c <= 1000; c++ {
		a, _ := cur.Encode("order", c)
		b, _ := old.Encode("order", c)
		if a == b {
			same++
		}
		if back, err := old.Decode("order", b); err != nil || back != c {
			t.Fatalf("v1 Decode(Encode(%d)) = %d, %v", c, back, err)
		}
	}
	if same > 0 {
		t.Fatalf("%d of 1000 counters encode the same under both versions: AES uses the raw key in version 2", same)
	}
	other := otherKey(t)
	for _, fp := range []string{other.Fingerprint(), v1Fingerprint(t, "0f0e0d0c0b0a09080706050403020100"), "", "ff1v2:0000000000000000"} {
		if _, err := k.Under(fp); !errors.Is(err, opaque.ErrKeyMismatch) {
			t.Errorf("Under(%q) = %v, want ErrKeyMismatch", fp, err)
		}
	}
}

// A store that recorded a tag under version 1 keeps working: the
// Generator encodes it as version 1 did, and a new tag as version 2.
func TestGenerator_Version1Tag(t *testing.T) {
	ctx := context.Background()
	k := testKey(t)
	store, alloc := allocWith(t, []segment.Tag{
		{Name: "old", MaxID: 1, Step: 10, Opaque: v1Fingerprint(t, rawKeyHex)},
		{Name: "new", MaxID: 1, Step: 10, Opaque: k.Fingerprint()},
	}...)
	g := opaque.NewGenerator(alloc, store, k)
	old, _ := k.Under(v1Fingerprint(t, rawKeyHex))
	for _, tc := range []struct {
		tag   string
		under *opaque.Key
	}{{"old", old}, {"new", k}} {
		for c := int64(1); c <= 3; c++ {
			id, err := g.Next(ctx, tc.tag)
			if err != nil {
				t.Fatal(err)
			}
			if back, err := tc.under.Decode(tc.tag, id); err != nil || back != c {
				t.Fatalf("%s: ID %d decodes to %d (%v) under %s, want %d", tc.tag, id, back, err, tc.under.Fingerprint(), c)
			}
		}
	}
}

// DecodeTag tells the truth: a plain tag is ErrNotOpaque, another key's
// ErrKeyMismatch, and a counter at or above max_id never issued.
func TestKey_DecodeTag(t *testing.T) {
	k := testKey(t)
	id5, _ := k.Encode("o", 5)
	id100, _ := k.Encode("o", 100)
	for _, tc := range []struct {
		name    string
		tag     segment.Tag
		id      int64
		wantErr error
		counter int64
		issued  bool
	}{
		{"issued", segment.Tag{Name: "o", MaxID: 100, Opaque: k.Fingerprint()}, id5, nil, 5, true},
		{"at max_id", segment.Tag{Name: "o", MaxID: 100, Opaque: k.Fingerprint()}, id100, nil, 100, false},
		{"plain", segment.Tag{Name: "o", MaxID: 100}, id5, opaque.ErrNotOpaque, 0, false},
		{"other key", segment.Tag{Name: "o", MaxID: 100, Opaque: otherKey(t).Fingerprint()}, id5, opaque.ErrKeyMismatch, 0, false},
		{"not positive", segment.Tag{Name: "o", MaxID: 100, Opaque: k.Fingerprint()}, 0, opaque.ErrRange, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := k.DecodeTag(tc.tag, tc.id)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("DecodeTag = %+v, %v; want %v", d, err, tc.wantErr)
				}
				return
			}
			if err != nil || d.Counter != tc.counter || d.Issued != tc.issued || d.Fingerprint != tc.tag.Opaque {
				t.Fatalf("DecodeTag = %+v, %v; want counter %d issued %v", d, err, tc.counter, tc.issued)
			}
		})
	}
}

// A Tags that refuses a tag with ErrRefused has it refused on every
// route, for good, before any counter leaves.
func TestGenerator_Refused(t *testing.T) {
	ctx := context.Background()
	_, alloc := allocWith(t, segment.Tag{Name: "t", MaxID: 1, Step: 10})
	g := opaque.NewGenerator(alloc, refusing{}, nil)
	for range 3 {
		id, err := g.Next(ctx, "t")
		ids, errN := g.NextN(ctx, "t", 2)
		_, errR := g.ReserveRange(ctx, "t", 5)
		if !errors.Is(err, opaque.ErrRefused) || !errors.Is(errN, opaque.ErrRefused) || !errors.Is(errR, opaque.ErrRefused) || id != 0 || ids != nil {
			t.Fatalf("Next = %d, %v; NextN = %v, %v; ReserveRange %v; want ErrRefused", id, err, ids, errN, errR)
		}
	}
}

type refusing struct{}

func (refusing) TagOpaque(context.Context, string) (string, error) {
	return "", opaque.ErrRefused
}
