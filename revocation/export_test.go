package revocation

// SetCursorForTest starts c from cursor, as if it had read up to there.
func SetCursorForTest(c *Client, cursor string) { c.cursor = cursor }

// SyncedForTest marks f loaded up to head, as its poller's first poll does.
func SyncedForTest(f *Feed, head int64) { f.synced(head) }

// ReadForTest hands f records as its poller does after a poll that read
// them: into the set, into the feed's log, and the head moved to the last.
func ReadForTest(f *Feed, recs ...Record) {
	es := make([]Entry, len(recs))
	for i, r := range recs {
		es[i] = r.Entry()
	}
	f.o.Set.Add(es...)
	f.append(recs, es)
	f.synced(recs[len(recs)-1].ID)
}

// The feed's budget of page builds, and the news never charged to it.
const (
	BuildsPerSecond = buildsPerSecond
	BuildBurst      = buildBurst
	FreeEntries     = freeEntries
)
