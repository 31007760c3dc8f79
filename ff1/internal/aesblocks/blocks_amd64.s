//go:build amd64 && !purego

#include "textflag.h"

// func encryptBlocksAsm(rounds int, xk *byte, dst, src *byte, n int)
//
// Eight blocks per pass, so that eight AESENC chains are in flight and the
// unit's latency is hidden; then the remaining blocks one at a time. Round
// keys are loaded once per round and pass, from xk: round key 0 is XORed
// in, rounds-1 AESENC follow, and AESENCLAST with the last key.
TEXT ·encryptBlocksAsm(SB), NOSPLIT, $0-40
	MOVQ rounds+0(FP), CX
	MOVQ xk+8(FP), AX
	MOVQ dst+16(FP), DI
	MOVQ src+24(FP), SI
	MOVQ n+32(FP), DX

eight:
	CMPQ DX, $8
	JB   one
	MOVUPS 0(SI), X0
	MOVUPS 16(SI), X1
	MOVUPS 32(SI), X2
	MOVUPS 48(SI), X3
	MOVUPS 64(SI), X4
	MOVUPS 80(SI), X5
	MOVUPS 96(SI), X6
	MOVUPS 112(SI), X7
	MOVUPS 0(AX), X8
	PXOR   X8, X0
	PXOR   X8, X1
	PXOR   X8, X2
	PXOR   X8, X3
	PXOR   X8, X4
	PXOR   X8, X5
	PXOR   X8, X6
	PXOR   X8, X7
	LEAQ   16(AX), BX
	LEAQ   -1(CX), R8

eightRound:
	MOVUPS (BX), X8
	AESENC X8, X0
	AESENC X8, X1
	AESENC X8, X2
	AESENC X8, X3
	AESENC X8, X4
	AESENC X8, X5
	AESENC X8, X6
	AESENC X8, X7
	ADDQ   $16, BX
	DECQ   R8
	JNZ    eightRound

	MOVUPS     (BX), X8
	AESENCLAST X8, X0
	AESENCLAST X8, X1
	AESENCLAST X8, X2
	AESENCLAST X8, X3
	AESENCLAST X8, X4
	AESENCLAST X8, X5
	AESENCLAST X8, X6
	AESENCLAST X8, X7
	MOVUPS     X0, 0(DI)
	MOVUPS     X1, 16(DI)
	MOVUPS     X2, 32(DI)
	MOVUPS     X3, 48(DI)
	MOVUPS     X4, 64(DI)
	MOVUPS     X5, 80(DI)
	MOVUPS     X6, 96(DI)
	MOVUPS     X7, 112(DI)
	ADDQ       $128, SI
	ADDQ       $128, DI
	SUBQ       $8, DX
	JMP        eight

one:
	TESTQ DX, DX
	JZ    done
	MOVUPS (SI), X0
	MOVUPS (AX), X8
	PXOR   X8, X0
	LEAQ   16(AX), BX
	LEAQ   -1(CX), R8

oneRound:
	MOVUPS (BX), X8
	AESENC X8, X0
	ADDQ   $16, BX
	DECQ   R8
	JNZ    oneRound

	MOVUPS     (BX), X8
	AESENCLAST X8, X0
	MOVUPS     X0, (DI)
	ADDQ       $16, SI
	ADDQ       $16, DI
	DECQ       DX
	JMP        one

done:
	RET

// Byte shuffles for encryptHalvesAsm (PSHUFB masks; 0x80 makes a zero
// byte). inLo takes the low quadword of a register, byte-swapped, into the
// high quadword, zeroing the low one; inHi does the same with the high
// quadword. out byte-swaps both quadwords in place.
DATA inLo<>+0x00(SB)/8, $0x8080808080808080
DATA inLo<>+0x08(SB)/8, $0x0001020304050607
GLOBL inLo<>(SB), (NOPTR+RODATA), $16
DATA inHi<>+0x00(SB)/8, $0x8080808080808080
DATA inHi<>+0x08(SB)/8, $0x08090a0b0c0d0e0f
GLOBL inHi<>(SB), (NOPTR+RODATA), $16
DATA out<>+0x00(SB)/8, $0x0001020304050607
DATA out<>+0x08(SB)/8, $0x08090a0b0c0d0e0f
GLOBL out<>(SB), (NOPTR+RODATA), $16

// LOADPAIR builds, from the two values at off(SI), the blocks
// BE(hi) || BE(lo^x) in xa and xb, already XORed with round key 0: X9
// holds (BE(hi) || BE(lo)) ^ key 0, so one XOR does both. The low
// quadword of an XMM register is bytes 0 to 7 little-endian, hence the
// byte swaps.
#define LOADPAIR(off, xa, xb) \
	MOVOU  off(SI), X10; \
	MOVOU  X10, xa; \
	PSHUFB X11, xa; \
	PXOR   X9, xa; \
	MOVOU  X10, xb; \
	PSHUFB X12, xb; \
	PXOR   X9, xb

// STOREPAIR writes the first 8 bytes of the blocks in xa and xb, each as
// a big-endian value, to off(DI) and off+8(DI).
#define STOREPAIR(xa, xb, off) \
	PUNPCKLQDQ xb, xa; \
	PSHUFB     X13, xa; \
	MOVOU      xa, off(DI)

// func encryptHalvesAsm(rounds int, xk *byte, out *uint64, hi, lo uint64, x *uint64, n int)
//
// The rounds are those of encryptBlocksAsm; only the way blocks come in
// and go out differs: from and to integers, by shuffles inside the XMM
// registers rather than through general registers, which would compete
// with AESENC for its port.
TEXT ·encryptHalvesAsm(SB), NOSPLIT, $0-56
	MOVQ   rounds+0(FP), CX
	MOVQ   xk+8(FP), AX
	MOVQ   out+16(FP), DI
	MOVQ   x+40(FP), SI
	MOVQ   n+48(FP), DX
	MOVQ   hi+24(FP), R10
	MOVQ   lo+32(FP), R9
	BSWAPQ R10
	BSWAPQ R9
	MOVQ   R10, X9
	MOVQ   R9, X10
	PUNPCKLQDQ X10, X9
	MOVUPS (AX), X8
	PXOR   X8, X9
	MOVOU  inLo<>(SB), X11
	MOVOU  inHi<>(SB), X12
	MOVOU  out<>(SB), X13

height:
	CMPQ DX, $8
	JB   hone
	LOADPAIR(0, X0, X1)
	LOADPAIR(16, X2, X3)
	LOADPAIR(32, X4, X5)
	LOADPAIR(48, X6, X7)
	LEAQ 16(AX), BX
	LEAQ -1(CX), R8

heightRound:
	MOVUPS (BX), X8
	AESENC X8, X0
	AESENC X8, X1
	AESENC X8, X2
	AESENC X8, X3
	AESENC X8, X4
	AESENC X8, X5
	AESENC X8, X6
	AESENC X8, X7
	ADDQ   $16, BX
	DECQ   R8
	JNZ    heightRound

	MOVUPS     (BX), X8
	AESENCLAST X8, X0
	AESENCLAST X8, X1
	AESENCLAST X8, X2
	AESENCLAST X8, X3
	AESENCLAST X8, X4
	AESENCLAST X8, X5
	AESENCLAST X8, X6
	AESENCLAST X8, X7
	STOREPAIR(X0, X1, 0)
	STOREPAIR(X2, X3, 16)
	STOREPAIR(X4, X5, 32)
	STOREPAIR(X6, X7, 48)
	ADDQ       $64, SI
	ADDQ       $64, DI
	SUBQ       $8, DX
	JMP        height

hone:
	TESTQ DX, DX
	JZ    hdone
	MOVQ   (SI), X0
	PSHUFB X11, X0
	PXOR   X9, X0
	LEAQ   16(AX), BX
	LEAQ   -1(CX), R8

honeRound:
	MOVUPS (BX), X8
	AESENC X8, X0
	ADDQ   $16, BX
	DECQ   R8
	JNZ    honeRound

	MOVUPS     (BX), X8
	AESENCLAST X8, X0
	PSHUFB     X13, X0
	MOVQ       X0, (DI)
	ADDQ       $8, SI
	ADDQ       $8, DI
	DECQ       DX
	JMP        hone

hdone:
	RET
