package main

import (
	"errors"
	"testing"
)

func TestAESHardwareOn(t *testing.T) {
	t.Parallel()
	const (
		amd64AES   = "processor\t: 0\nflags\t\t: fpu vme sse2 ssse3 sse4_1 sse4_2 aes avx\n\nprocessor\t: 1\nflags\t\t: fpu vme sse2 ssse3 sse4_1 sse4_2 aes avx\n"
		amd64NoAES = "processor\t: 0\nflags\t\t: fpu vme sse2 ssse3 sse4_1 sse4_2 avx\n"
		amd64Old   = "processor\t: 0\nflags\t\t: fpu vme sse2 ssse3 aes\n" // AES-NI without SSE4.1: crypto/aes needs both
		arm64AES   = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32\n"
		arm64NoAES = "processor\t: 0\nFeatures\t: fp asimd evtstrm crc32\n"
		noFlags    = "processor\t: 0\nvendor_id\t: GenuineIntel\n"
	)
	unreadable := errors.New("permission denied")
	for _, tc := range []struct {
		name, goos, goarch, godebug, cpuinfo string
		err                                  error
		hw, known                            bool
	}{
		{"linux/amd64 with AES-NI", "linux", "amd64", "", amd64AES, nil, true, true},
		{"linux/amd64 without", "linux", "amd64", "", amd64NoAES, nil, false, true},
		{"linux/amd64 AES-NI without SSE4.1", "linux", "amd64", "", amd64Old, nil, false, true},
		{"linux/arm64 with AES", "linux", "arm64", "", arm64AES, nil, true, true},
		{"linux/arm64 without", "linux", "arm64", "", arm64NoAES, nil, false, true},
		{"amd64 flags on arm64 are not Features", "linux", "arm64", "", amd64AES, nil, false, false},
		{"cpu.aes=off", "linux", "amd64", "cpu.aes=off", amd64AES, nil, false, true},
		{"cpu.all=off", "linux", "arm64", "madvdontneed=1,cpu.all=off", arm64AES, nil, false, true},
		{"cpu.all=off then cpu.aes=on", "linux", "amd64", "cpu.all=off,cpu.aes=on", amd64AES, nil, true, true},
		{"cpu.aes=off then cpu.aes=on", "linux", "amd64", "cpu.aes=off,cpu.aes=on", amd64AES, nil, true, true},
		{"other cpu options", "linux", "amd64", "cpu.avx2=off,cpu.aes=maybe", amd64AES, nil, true, true},
		{"cpuinfo unreadable", "linux", "amd64", "", "", unreadable, false, false},
		{"cpuinfo without flags", "linux", "amd64", "", noFlags, nil, false, false},
		{"darwin/arm64", "darwin", "arm64", "", "", unreadable, true, true},
		{"darwin/arm64 cpu.aes=off", "darwin", "arm64", "cpu.aes=off", "", unreadable, false, true},
		{"windows/amd64 cannot be told", "windows", "amd64", "", "", unreadable, false, false},
		{"ppc64le", "linux", "ppc64le", "", "", unreadable, true, true},
		{"s390x cannot be told", "linux", "s390x", "", "", unreadable, false, false},
		{"riscv64 has no assembly", "linux", "riscv64", "", amd64AES, nil, false, true},
		{"386 has no assembly", "linux", "386", "", amd64AES, nil, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hw, known := aesHardwareOn(tc.goos, tc.goarch, tc.godebug, func() ([]byte, error) {
				return []byte(tc.cpuinfo), tc.err
			})
			if hw != tc.hw || known != tc.known {
				t.Errorf("aesHardwareOn = %v, %v; want %v, %v", hw, known, tc.hw, tc.known)
			}
		})
	}
}
