package readable

// The check characters
//
// A readable ID s = s[0] s[1] … s[L-1] (L ≤ MaxLen = 78) is valid only if
//
//	C(s) = Σ (i+1)·s[i]  ≡ 0  (mod P),  P = 113,
//
// summed over every position, tag, separator, digits and check characters
// alike, with s[i] the character's ASCII code. Encode appends the two check
// characters that make the sum vanish; Decode recomputes them from the rest
// and compares, so everything Decode accepts satisfies C ≡ 0.
//
// Why this catches every single mistake of the two kinds asked for. Every
// character that may stand anywhere in a readable ID is one of
// [-.0-9:A-Z_a-z], ASCII 45 to 122, so two different ones differ by 1 to
// 77. Positions have weights 1 to 78. P is a prime larger than both, so a
// product of a weight (or a difference of weights) and a difference of
// characters is never a multiple of P. Take a valid s, C(s) ≡ 0:
//
//   - Substitution: replacing a by b ≠ a at position i changes C by
//     (i+1)·(b-a). Both factors lie in 1..77 or 1..78 in absolute value,
//     so the change is not ≡ 0 mod P, and neither is the new sum.
//   - Transposition: swapping a at i with b ≠ a at j changes C by
//     (i+1)·b + (j+1)·a - (i+1)·a - (j+1)·b = (i-j)·(b-a), again a product
//     of two numbers in 1..77 and not ≡ 0 mod P. Adjacent swaps (j = i+1)
//     are the case asked for; swaps at any distance are caught as well.
//   - A character outside that set is refused by Decode before the check
//     is looked at, and one that moves the last '_' only changes where
//     Decode splits the tag from the number, not C, which covers the whole
//     string.
//
// Both arguments need only that P is prime (no zero divisors, which rules
// out the even 66 or 58 as moduli: (a-b)·2 ≡ 0 mod 58 for a-b = 29) and
// larger than 78 (weights, distances) and 77 (differences of characters).
//
// Why two check characters, and why P = 113. A single check character
// would have to take P ≥ 67 values (P must exceed the 66 characters a tag
// may use, or two of them would look alike mod P), more than the 66
// characters that are safe unescaped in a URL. Two base58 characters x, y
// at positions n, n+1 (1-based: weights n+1 and n+2, n the length before
// them) must satisfy
//
//	(n+1)·x + (n+2)·y ≡ -C(body)  (mod P).
//
// The 58 base58 characters have 58 different codes mod P (y and z wrap to
// 8 and 9, which no other base58 character has), call that set A. As n+1
// and n+2 are invertible mod P, (n+1)·A and (n+2)·A have 58 elements each,
// and the Cauchy–Davenport theorem gives
//
//	|(n+1)·A + (n+2)·A| ≥ min(P, 58 + 58 - 1) = min(P, 115),
//
// so every residue has a solution as long as P ≤ 115. 113 is the largest
// prime that allows, which makes a random corruption (rather than one of
// the mistakes above) slip through about once in 113 tries. Of the
// solutions, Encode takes the one whose first check character comes
// earliest in the base58 alphabet; for each first character there is at
// most one second, so the pair, and with it the readable ID, is unique.
//
// The check characters are base58 too, so they are never '_' and never
// disturb the split at the last '_'. The tests check the arithmetic above
// exhaustively: every position and pair of characters, every length and
// residue.

// checkMod is the prime P above.
const checkMod = 113

// residueChar maps a residue mod checkMod to the base58 character with
// that ASCII code mod checkMod, or 0 if there is none.
var residueChar = func() (t [checkMod]byte) {
	for i := 0; i < len(alphabet); i++ {
		t[alphabet[i]%checkMod] = alphabet[i]
	}
	return t
}()

// inverse maps a nonzero residue mod checkMod to its multiplicative
// inverse (Fermat: a^(P-2)).
var inverse = func() (t [checkMod]int) {
	for a := 1; a < checkMod; a++ {
		r := 1
		for range checkMod - 2 {
			r = r * a % checkMod
		}
		t[a] = r
	}
	return t
}()

// weightedSum returns Σ (i+1)·s[i] mod checkMod.
func weightedSum[S ~string | ~[]byte](s S) int {
	sum := 0
	for i := 0; i < len(s); i++ {
		sum += (i + 1) * int(s[i])
	}
	return sum % checkMod
}

// checkChars returns the check characters for a body of length n (at most
// MaxLen-2) whose weighted sum is sum: the pair that makes the weighted sum
// of the whole string a multiple of checkMod, with the earliest possible
// first character.
func checkChars(sum, n int) (byte, byte) {
	need := (checkMod - sum) % checkMod // what the pair has to add
	w0, invW1 := n+1, inverse[n+2]
	for i := 0; i < len(alphabet); i++ {
		x := int(alphabet[i])
		y := (need - w0*x%checkMod + checkMod) * invW1 % checkMod
		if c := residueChar[y]; c != 0 {
			return alphabet[i], c
		}
	}
	panic("readable: no check characters; impossible by Cauchy–Davenport for a body of at most MaxLen-2 bytes")
}
