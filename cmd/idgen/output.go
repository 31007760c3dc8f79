package main

import (
	"fmt"
	"io"
	"text/tabwriter"
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

// table is a printer of aligned columns; end writes them out.
type table struct {
	printer
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header string) *table {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	t := &table{printer: printer{w: tw}, tw: tw}
	t.printf("%s\n", header)
	return t
}

// end flushes the table, or returns the first write error.
func (t *table) end() error {
	if t.err != nil {
		return t.err
	}
	return t.tw.Flush()
}
