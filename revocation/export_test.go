package revocation

// SetCursorForTest starts c from cursor, as if it had read up to there.
func SetCursorForTest(c *Client, cursor string) { c.cursor = cursor }
