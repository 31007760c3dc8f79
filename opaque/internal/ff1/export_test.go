package ff1

// NewCipherForTest is New with a smaller minimum domain, so that the
// permutation can be checked exhaustively.
var NewCipherForTest = newCipher
