package sqlstore

import (
	"net/url"
	"strings"
)

// sqliteURI is the "file:" URI naming the database file at path, with
// query q. SQLite decodes %HH in a URI's path and ends the path at "?" or
// "#", and the driver splits the name at the first "?": those three are
// escaped, so the file opened is the file named (serve and check alike).
// A path starting with "//" gets an empty authority, which SQLite would
// otherwise read as a host.
func sqliteURI(path string, q url.Values) string {
	p := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	if strings.HasPrefix(p, "//") {
		p = "//" + p
	}
	return "file:" + p + "?" + q.Encode()
}
