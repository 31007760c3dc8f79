// Package plant switches a fence fix off, one at a time, in a test
// binary built with the idgenplant tag, so that the simulator
// (internal/sim) can show it finds the hole each fix closes. In every
// other build On is a constant false and the switched code is the
// product's.
//
// A test selects a plant with the IDGEN_PLANT environment variable,
// named after the review's finding it re-opens (F1, F2, F3, F4, F5,
// F11, F12), or the lock-token fix (L1: grants not held after a
// fence; L2: no witness raise of lock tokens).
package plant
