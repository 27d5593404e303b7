//go:build !unix

package sqlstore

// SQLiteHolder cannot probe SQLite's locks here: it reports nobody.
func SQLiteHolder(path string) (held bool, pid int, err error) { return false, 0, nil }
