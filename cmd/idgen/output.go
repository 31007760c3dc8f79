package main

import (
	"fmt"
	"io"
)

// closeStore closes st when a command ends and reports a failed close,
// unless the command had already failed: defer closeStore(st, &err).
func closeStore(st io.Closer, err *error) {
	if cerr := st.Close(); cerr != nil && *err == nil {
		*err = fmt.Errorf("close the store: %w", cerr)
	}
}

// printer writes a command's output and keeps the first write error, so
// that a closed or full stdout fails the command once, at the end, rather
// than being ignored line by line.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, a...)
	}
}
