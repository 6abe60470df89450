package facade

import (
	"time"

	"github.com/google/uuid"
)

// NewID returns a new uuidv7 event id. It is safe for concurrent use.
func NewID() string {
	id, err := uuid.NewV7()
	if err != nil {
		// NewV7 fails only when the system's random source does.
		return uuid.NewString()
	}
	return id.String()
}

// IDTime returns the millisecond timestamp embedded in a uuidv7 id, and false
// when id is not a uuidv7.
func IDTime(id string) (time.Time, bool) {
	u, err := uuid.Parse(id)
	if err != nil || u.Version() != 7 {
		return time.Time{}, false
	}
	sec, nsec := u.Time().UnixTime()
	return time.Unix(sec, nsec), true
}
