#!/usr/bin/env python3
"""A reference FF1 (NIST SP 800-38G, Algorithms 7 and 8), written apart
from the Go package from the standard's text, over the AES of Python's
`cryptography` package (OpenSSL). It made radix2_63.txt once:

    python3 ff1ref.py > radix2_63.txt

Before it writes anything it checks itself against NIST's nine FF1
samples and Zcash's four radix-2 vectors. The Go tests never run it; they
compare the package against the table it wrote.
"""

import random
import sys

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes


def aes(key, block):
    e = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return e.update(block) + e.finalize()


def xor(a, b):
    return bytes(x ^ y for x, y in zip(a, b))


def prf(key, data):
    """CBC-MAC under a zero IV: the last block of CBC."""
    y = bytes(16)
    for i in range(0, len(data), 16):
        y = aes(key, xor(y, data[i:i + 16]))
    return y


def num(xs, radix):
    v = 0
    for d in xs:
        v = v * radix + d
    return v


def strm(v, radix, m):
    out = [0] * m
    for i in range(m - 1, -1, -1):
        v, out[i] = divmod(v, radix)
    return out


def ceil_log2(x):
    """Smallest k with 2**k >= x, for x >= 1."""
    k = 0
    while (1 << k) < x:
        k += 1
    return k


def ff1(key, radix, tweak, x, decrypt=False):
    n, t = len(x), len(tweak)
    u = n // 2
    v = n - u
    a, b = x[:u], x[u:]
    bb = (ceil_log2(radix ** v) + 7) // 8
    d = 4 * ((bb + 3) // 4) + 4
    p = bytes([1, 2, 1]) + radix.to_bytes(3, "big") + bytes([10, u % 256]) \
        + n.to_bytes(4, "big") + t.to_bytes(4, "big")

    def y(i, half):
        q = tweak + bytes((-t - bb - 1) % 16) + bytes([i]) \
            + num(half, radix).to_bytes(bb, "big")
        r = prf(key, p + q)
        s = r
        j = 1
        while len(s) < d:
            s += aes(key, xor(r, j.to_bytes(16, "big")))
            j += 1
        return int.from_bytes(s[:d], "big")

    if not decrypt:
        for i in range(10):
            m = u if i % 2 == 0 else v
            c = (num(a, radix) + y(i, b)) % radix ** m
            a, b = b, strm(c, radix, m)
    else:
        for i in range(9, -1, -1):
            m = u if i % 2 == 0 else v
            c = (num(b, radix) - y(i, a)) % radix ** m
            b, a = a, strm(c, radix, m)
    return a + b


ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


def selfcheck():
    k128 = bytes.fromhex("2B7E151628AED2A6ABF7158809CF4F3C")
    k192 = k128 + bytes.fromhex("EF4359D8D580AA4F")
    k256 = k192 + bytes.fromhex("7F036D6F04FC6A94")
    t1 = bytes.fromhex("39383736353433323130")
    t2 = bytes.fromhex("3737373770717273373737")
    p10, p36 = "0123456789", "0123456789abcdefghi"
    nist = [
        (k128, b"", 10, p10, "2433477484"),
        (k128, t1, 10, p10, "6124200773"),
        (k128, t2, 36, p36, "a9tv40mll9kdu509eum"),
        (k192, b"", 10, p10, "2830668132"),
        (k192, t1, 10, p10, "2496655549"),
        (k192, t2, 36, p36, "xbj3kv35jrawxv32ysr"),
        (k256, b"", 10, p10, "6657667009"),
        (k256, t1, 10, p10, "1001623463"),
        (k256, t2, 36, p36, "xs8a0azh2avyalyzuwd"),
    ]
    zero88 = "0" * 88
    z1 = "0000100100110101011101111111110011000001101100111110011101110101011010100100010011001111"
    z2 = "1101101011010001100011110000010011001111110110011101010110100001111001000101011111011000"
    alt = "01" * 44
    z3 = "0000111101000001111011010111011111110001100101000000001101101110100010010111001100100110"
    z4 = "0111110110001000000111010110000100010101101000000011100111100100100010101101111010100011"
    zcash = [
        (k256, b"", 2, zero88, z1),
        (k256, b"", 2, z1, z2),
        (k256, b"", 2, alt, z3),
        (k256, bytes(range(255)), 2, alt, z4),
    ]
    for key, tweak, radix, pt, ct in nist + zcash:
        x = [ALPHABET.index(c) for c in pt]
        got = "".join(ALPHABET[d] for d in ff1(key, radix, tweak, x))
        assert got == ct, (pt, got, ct)
        back = ff1(key, radix, tweak, [ALPHABET.index(c) for c in ct], decrypt=True)
        assert back == x, (ct, back)


def main():
    selfcheck()
    rng = random.Random(63)
    keys = [bytes(rng.getrandbits(8) for _ in range(n)) for n in (16, 24, 32)]
    # Tweaks as tag names are: empty, short ("order": 6 bytes of padding),
    # 11 bytes (no padding: Q is one block), 27 (no padding, two blocks)
    # and 40 (three blocks of CBC-MAC before the last).
    tweaks = [b"", b"order", b"invoice-v11", b"tenant-42/shipments-eu-2026", bytes(range(40))]
    values = [0, 1, 2, 3, 1000, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**62, 2**63 - 1]
    values += [rng.getrandbits(63) for _ in range(5)]
    w = sys.stdout.write
    w("# FF1-AES, radix 2, 63 numerals: the low 63 bits of a uint64, bit 62 the\n")
    w("# most significant numeral. Made once by ff1ref.py (this folder), an FF1\n")
    w("# written apart from the Go package, over OpenSSL's AES through Python's\n")
    w("# cryptography package; see ff1ref.py.\n")
    w("# key (hex) | tweak (hex, - for none) | plaintext | ciphertext (decimal)\n")
    for key in keys:
        for tweak in tweaks:
            for x in values:
                bits = [(x >> (62 - i)) & 1 for i in range(63)]
                y = num(ff1(key, 2, tweak, bits), 2)
                assert num(ff1(key, 2, tweak, strm(y, 2, 63), decrypt=True), 2) == x
                w("%s %s %d %d\n" % (key.hex(), tweak.hex() or "-", x, y))


if __name__ == "__main__":
    main()
