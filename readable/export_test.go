package readable

// WithCheck appends the check characters to body, so that tests can build
// strings with a valid checksum that break another rule.
func WithCheck(body string) string {
	c0, c1 := checkChars(weightedSum(body), len(body))
	return body + string([]byte{c0, c1})
}
