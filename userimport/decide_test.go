package userimport_test

import (
	"testing"

	"github.com/authsidecar/authsidecar/userimport"
)

// TestDecide: what each conflict mode makes of a line whose id or email
// exists. An update never changes an id and never merges two users.
func TestDecide(t *testing.T) {
	ann := &userimport.Existing{ID: "1", Email: "ann@example.com"}
	bob := &userimport.Existing{ID: "2", Email: "bob@example.com"}
	line := func(id, email string) userimport.Record { return userimport.Record{ID: id, Email: email} }
	generated := userimport.Record{ID: "Gen32", Email: "ann@example.com", GeneratedID: true}
	const (
		sameUser = "user 1 exists already with this email"
		idTaken  = "id 1 exists already (with email ann@example.com)"
		mailOf1  = "email exists already (user 1)"
		split    = "id 1 exists already, and the email belongs to another user (id 2)"
	)
	type want struct {
		action userimport.Action
		target string
		reason string
	}
	tests := []struct {
		name          string
		r             userimport.Record
		byID, byEmail *userimport.Existing
		fail          want
		skip          want
		update        want
	}{
		{"new", line("3", "cy@example.com"), nil, nil,
			want{userimport.Imported, "", ""}, want{userimport.Imported, "", ""}, want{userimport.Imported, "", ""}},
		{"the same user", line("1", "ann@example.com"), ann, ann,
			want{userimport.Refused, "", sameUser}, want{userimport.Skipped, "", sameUser}, want{userimport.Updated, "1", ""}},
		{"id taken, email free", line("1", "new@example.com"), ann, nil,
			want{userimport.Refused, "", idTaken}, want{userimport.Skipped, "", idTaken}, want{userimport.Updated, "1", ""}},
		{"email taken by another id", line("3", "ann@example.com"), nil, ann,
			want{userimport.Refused, "", mailOf1}, want{userimport.Skipped, "", mailOf1},
			want{userimport.Refused, "", mailOf1 + ": an update never changes a user's id"}},
		{"no id, email taken", generated, nil, ann,
			want{userimport.Refused, "", mailOf1}, want{userimport.Skipped, "", mailOf1}, want{userimport.Updated, "1", ""}},
		{"id of one user, email of another", line("1", "bob@example.com"), ann, bob,
			want{userimport.Refused, "", split}, want{userimport.Skipped, "", split},
			want{userimport.Refused, "", split + ": an update cannot merge two users"}},
	}
	for _, tt := range tests {
		for mode, w := range map[userimport.Conflict]want{userimport.Fail: tt.fail, userimport.Skip: tt.skip, userimport.Update: tt.update} {
			d := userimport.Decide(tt.r, tt.byID, tt.byEmail, mode)
			if d.Action != w.action || d.Target != w.target || d.Reason != w.reason {
				t.Errorf("%s, %s: got %+v, want %+v", tt.name, mode, d, w)
			}
		}
	}
}
