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
