package readable

import (
	"testing"

	"github.com/idgen/idgen"
)

// charset holds every byte that may stand anywhere in a readable ID: the
// tag characters, which include '_' and every base58 digit.
func charset() []byte {
	var cs []byte
	for c := 0; c < 256; c++ {
		if idgen.ValidTag("x" + string(rune(c))) { // "." alone is refused, "x." is not
			cs = append(cs, byte(c))
		}
	}
	return cs
}

func TestCharset_CoversAlphabet(t *testing.T) {
	cs := charset()
	if len(cs) != 66 {
		t.Fatalf("%d tag characters, want 66", len(cs))
	}
	in := map[byte]bool{}
	for _, c := range cs {
		in[c] = true
	}
	for i := 0; i < len(alphabet); i++ {
		if !in[alphabet[i]] {
			t.Errorf("base58 digit %q is not a tag character", alphabet[i])
		}
	}
	if max := int(cs[len(cs)-1]) - int(cs[0]); max >= checkMod {
		t.Errorf("characters differ by up to %d, not below the modulus %d", max, checkMod)
	}
}

// TestChecksum_Lemma checks, for every position and every pair of
// characters, the two facts the proof in checksum.go rests on: a
// substitution and a transposition (at any distance) both change the
// weighted sum by a nonzero amount mod checkMod.
func TestChecksum_Lemma(t *testing.T) {
	cs := charset()
	for i := 0; i < MaxLen; i++ {
		for _, a := range cs {
			for _, b := range cs {
				if a == b {
					continue
				}
				if d := (i + 1) * (int(b) - int(a)); d%checkMod == 0 {
					t.Fatalf("substituting %q by %q at %d changes the sum by %d ≡ 0", a, b, i, d)
				}
				for j := i + 1; j < MaxLen; j++ {
					if d := (i - j) * (int(b) - int(a)); d%checkMod == 0 {
						t.Fatalf("swapping %q at %d with %q at %d changes the sum by %d ≡ 0", a, i, b, j, d)
					}
				}
			}
		}
	}
}

// TestCheckChars_EveryLengthAndResidue checks exhaustively what
// Cauchy–Davenport promises: for every body length and every weighted sum
// there are check characters, and they make the whole sum vanish.
func TestCheckChars_EveryLengthAndResidue(t *testing.T) {
	for n := 0; n <= MaxLen-checkLen; n++ {
		for sum := 0; sum < checkMod; sum++ {
			c0, c1 := checkChars(sum, n)
			if digitOf[c0] < 0 || digitOf[c1] < 0 {
				t.Fatalf("n=%d sum=%d: check %q%q is not base58", n, sum, c0, c1)
			}
			if total := sum + (n+1)*int(c0) + (n+2)*int(c1); total%checkMod != 0 {
				t.Fatalf("n=%d sum=%d: check %q%q leaves %d mod %d", n, sum, c0, c1, total%checkMod, checkMod)
			}
			// Unique for its first character, and none earlier fits.
			for i := 0; i < len(alphabet); i++ {
				for j := 0; j < len(alphabet); j++ {
					x, y := alphabet[i], alphabet[j]
					if (sum+(n+1)*int(x)+(n+2)*int(y))%checkMod != 0 {
						continue
					}
					if digitOf[x] < digitOf[c0] || (x == c0 && y != c1) {
						t.Fatalf("n=%d sum=%d: %q%q fits and precedes or rivals %q%q", n, sum, x, y, c0, c1)
					}
				}
			}
		}
	}
}

func TestInverse(t *testing.T) {
	for a := 1; a < checkMod; a++ {
		if a*inverse[a]%checkMod != 1 {
			t.Fatalf("inverse[%d] = %d", a, inverse[a])
		}
	}
}
