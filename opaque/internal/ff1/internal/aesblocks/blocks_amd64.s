//go:build amd64 && !purego

#include "textflag.h"

// AES8 applies one AES round instruction (AESENC or AESENCLAST) with the
// round key in X8 to the eight blocks in X0 to X7.
#define AES8(op) \
	op X8, X0; op X8, X1; op X8, X2; op X8, X3; \
	op X8, X4; op X8, X5; op X8, X6; op X8, X7

// VAES8 is AES8 on Y0 to Y7, two blocks each, with the key in both lanes
// of Y8.
#define VAES8(op) \
	op Y8, Y0, Y0; op Y8, Y1, Y1; op Y8, Y2, Y2; op Y8, Y3, Y3; \
	op Y8, Y4, Y4; op Y8, Y5, Y5; op Y8, Y6, Y6; op Y8, Y7, Y7

// func encryptBlockAsm(rounds int, xk *byte, dst, src *byte)
//
// Round key 0 is XORed in, rounds-1 AESENC follow, and AESENCLAST with
// the last key; the round keys are read from xk in turn.
TEXT ·encryptBlockAsm(SB), NOSPLIT, $0-32
	MOVQ   rounds+0(FP), CX
	MOVQ   xk+8(FP), AX
	MOVQ   dst+16(FP), DI
	MOVQ   src+24(FP), SI
	MOVUPS (SI), X0
	MOVUPS (AX), X8
	PXOR   X8, X0
	LEAQ   16(AX), BX
	LEAQ   -1(CX), R8

blockRound:
	MOVUPS (BX), X8
	AESENC X8, X0
	ADDQ   $16, BX
	DECQ   R8
	JNZ    blockRound

	MOVUPS     (BX), X8
	AESENCLAST X8, X0
	MOVUPS     X0, (DI)
	RET

// Byte shuffles for encryptAddAsm and encryptAddVAES (PSHUFB masks; 0x80 makes a zero
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

// STOREPAIR takes the first 8 bytes of the blocks in xa and xb, each as
// a big-endian value y, and sets the accumulators at off(DI) and
// off+8(DI) to (acc + y) & mask, the mask in both quadwords of X14.
#define STOREPAIR(xa, xb, off) \
	PUNPCKLQDQ xb, xa; \
	PSHUFB     X13, xa; \
	MOVOU      off(DI), X10; \
	PADDQ      X10, xa; \
	PAND       X14, xa; \
	MOVOU      xa, off(DI)

// func encryptAddAsm(rounds int, xk *byte, acc *uint64, mask, hi, lo uint64, x *uint64, n int)
//
// Eight blocks per pass, so that eight AESENC chains are in flight and the
// unit's latency is hidden, then the rest one at a time. The rounds are
// those of encryptBlockAsm; only the way blocks come in
// and go out differs: from and to integers, by shuffles inside the XMM
// registers rather than through general registers, which would compete
// with AESENC for its port, and added into the accumulators.
TEXT ·encryptAddAsm(SB), NOSPLIT, $0-64
	MOVQ   rounds+0(FP), CX
	MOVQ   xk+8(FP), AX
	MOVQ   acc+16(FP), DI
	MOVQ   mask+24(FP), R11
	MOVQ   x+48(FP), SI
	MOVQ   n+56(FP), DX
	MOVQ   hi+32(FP), R10
	MOVQ   lo+40(FP), R9
	MOVQ   R11, X14
	PUNPCKLQDQ X14, X14
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
	AES8(AESENC)
	ADDQ   $16, BX
	DECQ   R8
	JNZ    heightRound

	MOVUPS     (BX), X8
	AES8(AESENCLAST)
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
	MOVQ       (DI), X10
	PADDQ      X10, X0
	PAND       X14, X0
	MOVQ       X0, (DI)
	ADDQ       $8, SI
	ADDQ       $8, DI
	DECQ       DX
	JMP        hone

hdone:
	RET

// VLOAD4 builds, from the four values at off(SI), the blocks BE(hi) ||
// BE(lo^x) two to a register, in ya (values 0 and 1) and yb (2 and 3),
// XORed with round key 0 as LOADPAIR does: VPERMQ puts each value in both
// quadwords of its lane, and the lane-wise shuffle of Y11 (inLo in both
// lanes) keeps it, byte-swapped, in the high one.
#define VLOAD4(off, ya, yb) \
	VMOVDQU off(SI), Y10; \
	VPERMQ  $0x50, Y10, ya; \
	VPERMQ  $0xfa, Y10, yb; \
	VPSHUFB Y11, ya, ya; \
	VPSHUFB Y11, yb, yb; \
	VPXOR   Y9, ya, ya; \
	VPXOR   Y9, yb, yb

// VSTORE4 takes the first 8 bytes of the four blocks in ya and yb, each
// as a big-endian value y, into the four accumulators at off(DI) as
// STOREPAIR does: the low quadwords of the lanes are y0 y1 in ya and y2
// y3 in yb; VPUNPCKLQDQ gives y0 y2 | y1 y3, VPERMQ puts them in order
// and Y13 (out in both lanes) swaps their bytes.
#define VSTORE4(ya, yb, off) \
	VPUNPCKLQDQ yb, ya, ya; \
	VPERMQ      $0xd8, ya, ya; \
	VPSHUFB     Y13, ya, ya; \
	VPADDQ      off(DI), ya, ya; \
	VPAND       Y14, ya, ya; \
	VMOVDQU     ya, off(DI)

// func encryptAddVAES(rounds int, xk *byte, acc *uint64, mask, hi, lo uint64, x *uint64, n int)
//
// encryptAddAsm with VAES on 256-bit registers: two blocks per
// instruction, sixteen in flight, for n a multiple of 16.
TEXT ·encryptAddVAES(SB), NOSPLIT, $0-64
	MOVQ        rounds+0(FP), CX
	MOVQ        xk+8(FP), AX
	MOVQ        acc+16(FP), DI
	MOVQ        mask+24(FP), R11
	MOVQ        x+48(FP), SI
	MOVQ        n+56(FP), DX
	MOVQ        hi+32(FP), R10
	MOVQ        lo+40(FP), R9
	VMOVQ       R11, X14
	VPBROADCASTQ X14, Y14
	BSWAPQ      R10
	BSWAPQ      R9
	VMOVQ       R10, X9
	VMOVQ       R9, X10
	VPUNPCKLQDQ X10, X9, X9
	VPXOR       (AX), X9, X9
	VINSERTI128 $1, X9, Y9, Y9
	VBROADCASTI128 inLo<>(SB), Y11
	VBROADCASTI128 out<>(SB), Y13

vsixteen:
	CMPQ DX, $16
	JB   vdone
	VLOAD4(0, Y0, Y1)
	VLOAD4(32, Y2, Y3)
	VLOAD4(64, Y4, Y5)
	VLOAD4(96, Y6, Y7)
	LEAQ 16(AX), BX
	LEAQ -1(CX), R8

vround:
	VBROADCASTI128 (BX), Y8
	VAES8(VAESENC)
	ADDQ           $16, BX
	DECQ           R8
	JNZ            vround

	VBROADCASTI128 (BX), Y8
	VAES8(VAESENCLAST)
	VSTORE4(Y0, Y1, 0)
	VSTORE4(Y2, Y3, 32)
	VSTORE4(Y4, Y5, 64)
	VSTORE4(Y6, Y7, 96)
	ADDQ           $128, SI
	ADDQ           $128, DI
	SUBQ           $16, DX
	JMP            vsixteen

vdone:
	VZEROUPPER
	RET
