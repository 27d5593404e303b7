package userimport

import (
	"fmt"
	"strconv"
)

// Existing is a user a store found with a record's id or email.
type Existing struct {
	ID    string
	Email string
}

// Decision is what a store does with one record, given the users it found
// with the record's id (byID; only for an id the line gave) and with its
// email (byEmail: the user who claims it).
type Decision struct {
	// Action is Imported (insert the record), Updated (write it over
	// Target), Skipped or Refused.
	Action Action
	// Target is the id of the user to update.
	Target string
	// Reason says why a record is skipped or refused.
	Reason string
}

// Decide applies the conflict mode. Ids are never changed: a line whose
// id is new but whose email belongs to a user with another id is not an
// update of that user, it is refused (an update would have to change the
// id the application's tables point at, or merge two users).
func Decide(r Record, byID, byEmail *Existing, mode Conflict) Decision {
	if byID == nil && byEmail == nil {
		return Decision{Action: Imported}
	}
	var reason string
	split := byID != nil && byEmail != nil && byID.ID != byEmail.ID
	switch {
	case split:
		reason = fmt.Sprintf("id %s exists already, and the email belongs to another user (id %s)", r.ID, byEmail.ID)
	case byID != nil && byID.Email == r.Email:
		reason = fmt.Sprintf("user %s exists already with this email", r.ID)
	case byID != nil:
		reason = fmt.Sprintf("id %s exists already (with email %s)", r.ID, shown(byID.Email))
	default:
		reason = fmt.Sprintf("email exists already (user %s)", byEmail.ID)
	}
	switch mode {
	case Skip:
		return Decision{Action: Skipped, Reason: reason}
	case Update:
		switch {
		case split:
			return Decision{Action: Refused, Reason: reason + ": an update cannot merge two users"}
		case byID != nil:
			return Decision{Action: Updated, Target: byID.ID}
		case r.GeneratedID:
			return Decision{Action: Updated, Target: byEmail.ID}
		default:
			return Decision{Action: Refused, Reason: reason + ": an update never changes a user's id"}
		}
	}
	return Decision{Action: Refused, Reason: reason}
}

// Raced is the outcome of a record the store's unique constraints refused
// after Decide found nothing: a user with its id or email was written in
// between (a sign-up, while the sidecar serves).
func Raced(mode Conflict) Outcome {
	o := Outcome{Action: Refused, Reason: "its id or email was registered while importing"}
	switch mode {
	case Skip:
		o.Action = Skipped
	case Update:
		o.Reason += ": run the import again to update it"
	}
	return o
}

// shown is a stored value in a message: as it is when it prints plainly,
// quoted when it holds anything a terminal could take for a command (an
// address an identity provider gave is not checked as sign-up checks).
func shown(s string) string {
	for i := range len(s) {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return strconv.Quote(s)
		}
	}
	return s
}
