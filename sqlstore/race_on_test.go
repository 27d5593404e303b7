//go:build race

package sqlstore_test

// raceEnabled: the race detector slows every memory access, and SQLite
// here is Go code (modernc): a statement runs tens of times slower.
const raceEnabled = true
