package main

import (
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
)

// aesHardware reports whether crypto/aes runs on the CPU's AES
// instructions in this process, and whether that could be told at all.
// Without them crypto/aes runs in software, and every opaque ID, ten AES
// blocks, costs several times the CPU.
//
// The standard library does not say: crypto/aes decides from
// internal/cpu, which no other module can import (golang.org/x/sys/cpu
// could say, but it is not the standard library, and a cipher's
// dependency only for a warning does not earn its place). So this asks
// the same questions from outside, the way crypto/aes 1.26 answers them:
//
//   - architectures for which crypto/aes has no assembly (386, riscv64,
//     loong64, mips, wasm…) always run in software;
//   - ppc64 and ppc64le always have it (Go requires POWER8), and darwin/arm64
//     (Apple silicon);
//   - amd64 and arm64 on Linux have it when the kernel's /proc/cpuinfo
//     lists the features crypto/aes checks, "aes", "sse4_1" and "ssse3"
//     in flags on amd64, "aes" in Features on arm64, and GODEBUG does
//     not turn them off (cpu.aes=off or cpu.all=off);
//   - anything else (other systems, s390x) cannot be told, and is not
//     warned about.
//
// A build with the purego tag runs crypto/aes in software too; that is
// a choice of whoever built the binary, and is not looked for.
func aesHardware() (hw, known bool) {
	return aesHardwareOn(runtime.GOOS, runtime.GOARCH, os.Getenv("GODEBUG"), func() ([]byte, error) {
		return os.ReadFile("/proc/cpuinfo")
	})
}

// aesHardwareOn is aesHardware for a given system, architecture, GODEBUG
// and /proc/cpuinfo, so that the tests can take every branch.
func aesHardwareOn(goos, goarch, godebug string, cpuinfo func() ([]byte, error)) (hw, known bool) {
	switch goarch {
	case "ppc64", "ppc64le":
		return true, true
	case "amd64", "arm64":
	case "s390x":
		return false, false
	default:
		return false, true
	}
	if godebugOff(godebug, "aes") {
		return false, true
	}
	if goos == "darwin" && goarch == "arm64" {
		return true, true
	}
	if goos != "linux" && goos != "android" {
		return false, false
	}
	b, err := cpuinfo()
	if err != nil {
		return false, false
	}
	key, want := "flags", []string{"aes", "sse4_1", "ssse3"}
	if goarch == "arm64" {
		key, want = "Features", []string{"aes"}
	}
	// Every processor's block lists the same features; the first says.
	for line := range strings.Lines(string(b)) {
		name, value, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(name) != key {
			continue
		}
		have := strings.Fields(value)
		for _, w := range want {
			if !slices.Contains(have, w) {
				return false, true
			}
		}
		return true, true
	}
	return false, false
}

// godebugOff reports whether GODEBUG turns the CPU feature off for the
// runtime, as internal/cpu reads it: comma-separated cpu.NAME=on|off,
// cpu.all for every feature, the last setting winning.
func godebugOff(godebug, feature string) bool {
	off := false
	for field := range strings.SplitSeq(godebug, ",") {
		k, v, ok := strings.Cut(field, "=")
		if !ok || (k != "cpu."+feature && k != "cpu.all") || (v != "on" && v != "off") {
			continue
		}
		off = v == "off"
	}
	return off
}

// warnSoftwareAES warns at the start of a server that holds an opaque key
// when crypto/aes runs in software here.
func warnSoftwareAES(log *slog.Logger) {
	if hw, known := aesHardware(); known && !hw {
		log.Warn("AES is not hardware-accelerated here: crypto/aes runs in software, so every opaque ID (ten AES blocks) costs several times the CPU; serve opaque tags from a CPU with AES instructions (AES-NI, ARMv8 AES)",
			"goos", runtime.GOOS, "goarch", runtime.GOARCH)
	}
}
