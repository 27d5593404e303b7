package userimport

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/authsidecar/authsidecar/passhash"
)

// Report writes the plain summary of an import that took elapsed: what
// was imported, updated, skipped and refused, the hash formats written,
// and, if the import stopped short, where and how to go on.
func (s Summary) Report(w io.Writer, dryRun bool, elapsed time.Duration) {
	verb := func(did, would string) string {
		if dryRun {
			return would
		}
		return did
	}
	if dryRun {
		fmt.Fprintln(w, "dry run: nothing was written; a real run would do what follows")
	}
	fmt.Fprintf(w, "%s %s", verb("imported", "would import"), plural(s.Imported, "user"))
	if s.NoPassword > 0 {
		fmt.Fprintf(w, " (%s without a password hash)", thousands(s.NoPassword))
	}
	fmt.Fprintf(w, ", %s %s, %s %s, refused %s; %s read in %s\n",
		verb("updated", "would update"), thousands(s.Updated), verb("skipped", "would skip"), thousands(s.Skipped),
		thousands(s.Refused), plural(s.Line, "line"), elapsed.Round(time.Millisecond))
	if len(s.Hashes) > 0 {
		var parts []string
		for _, f := range passhash.Formats() {
			if n := s.Hashes[f]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %s", f, thousands(n)))
			}
		}
		fmt.Fprintf(w, "password hashes %s: %s\n", verb("written", "to write"), strings.Join(parts, ", "))
	}
	if s.RolesGranted > 0 {
		fmt.Fprintf(w, "roles granted: %s\n", thousands(s.RolesGranted))
	}
	if s.Stopped {
		fmt.Fprintf(w, "stopped after line %d: %s refused (-max-errors); the lines after it were not read: fix the file and run the import again with -on-conflict skip (the users written are skipped)\n", s.Line, plural(s.Refused, "line"))
	}
	if s.Unfinished > 0 && !dryRun {
		fmt.Fprintf(w, "the lines from %d on may not have been written: run the import again with -on-conflict skip to import them (the users already written are skipped)\n", s.Unfinished)
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return thousands(n) + " " + word + "s"
}
