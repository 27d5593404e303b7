package revocation

// SetCursorForTest starts c from cursor, as if it had read up to there.
func SetCursorForTest(c *Client, cursor string) { c.cursor = cursor }

// SyncedForTest marks f loaded up to head, as its poller's first poll does.
func SyncedForTest(f *Feed, head int64) { f.synced(head) }
