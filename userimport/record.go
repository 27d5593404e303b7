package userimport

import (
	"context"
	"time"

	"github.com/authsidecar/authsidecar/passhash"
)

// Record is one valid line: a user to write.
type Record struct {
	// Line is the line's number in the file (for CSV, where the record
	// starts), 1 for the first.
	Line int
	// ID is the user id: the line's, or generated (GeneratedID).
	ID string
	// GeneratedID says the line gave no id. Such a line is matched with
	// an existing user by its email only.
	GeneratedID bool
	// Email is lower case and valid.
	Email         string
	Name          string
	EmailVerified bool
	// Image is nil when the line gave none.
	Image *string
	// CreatedAt is the line's, or the import's start.
	CreatedAt time.Time
	// PasswordHash is the stored value as given, parsed and within the
	// cost bounds ("": none); HashFormat is its format.
	PasswordHash string
	HashFormat   passhash.Format
	// Roles are valid role names, without repeats.
	Roles []string
	// Given says which optional fields the line gave: an update changes
	// only those.
	Given Field
}

// Field is a set of the optional fields of a line.
type Field uint8

// The optional fields. ID and email are not among them: a line always has
// an email, and an id given or generated.
const (
	FieldName Field = 1 << iota
	FieldEmailVerified
	FieldImage
	FieldCreatedAt
	FieldPasswordHash
	FieldRoles
)

// Has reports whether f holds g.
func (f Field) Has(g Field) bool { return f&g != 0 }

// Conflict is what to do with a line whose id or email exists already.
type Conflict int

// The conflict modes (-on-conflict).
const (
	// Fail refuses the line; nothing of it is written.
	Fail Conflict = iota
	// Skip leaves the existing user as it is; the line is counted skipped.
	// It makes a re-run after an interruption import only the rest.
	Skip
	// Update writes the line's fields over the existing user's.
	Update
)

// ParseConflict reads fail, skip or update.
func ParseConflict(s string) (Conflict, bool) {
	switch s {
	case "fail":
		return Fail, true
	case "skip":
		return Skip, true
	case "update":
		return Update, true
	}
	return 0, false
}

func (c Conflict) String() string {
	switch c {
	case Skip:
		return "skip"
	case Update:
		return "update"
	}
	return "fail"
}

// Action is what became of one line.
type Action uint8

// The actions, in the order Summary counts them.
const (
	Imported Action = iota
	Updated
	Skipped
	Refused
)

// Outcome is what the store did with one record (in a dry run: would do).
type Outcome struct {
	Action Action
	// Reason says why a line was skipped or refused; empty otherwise.
	Reason string
}

// BatchOptions is how a store writes a batch.
type BatchOptions struct {
	OnConflict Conflict
	// DryRun checks the batch against the store and writes nothing: the
	// outcomes are what a real run would do.
	DryRun bool
	// Now is the instant written as updated_at and as the roles' grant.
	Now time.Time
}

// BatchResult is what a store reports of a batch.
type BatchResult struct {
	// Outcomes holds one outcome per record, in order.
	Outcomes []Outcome
	// RolesGranted counts the roles newly granted (a role the user held
	// already is not counted).
	RolesGranted int
}

// Store writes batches of validated records. Each batch is written in one
// transaction, or not at all (an error): an interrupted import leaves
// whole batches.
type Store interface {
	ImportUsers(ctx context.Context, batch []Record, o BatchOptions) (BatchResult, error)
}
