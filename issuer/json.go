package issuer

import (
	"time"
)

// jsTime marshals like JavaScript's Date.toJSON: UTC with milliseconds.
type jsTime time.Time

func (t jsTime) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Time(t).UTC().Format("2006-01-02T15:04:05.000Z") + `"`), nil
}

type userJSON struct {
	ID            string  `json:"id"`
	Name          string  `json:"name"`
	Email         string  `json:"email"`
	EmailVerified bool    `json:"emailVerified"`
	Image         *string `json:"image"`
	CreatedAt     jsTime  `json:"createdAt"`
	UpdatedAt     jsTime  `json:"updatedAt"`
}

func toUserJSON(u User) userJSON {
	return userJSON{
		ID: u.ID, Name: u.Name, Email: u.Email, EmailVerified: u.EmailVerified, Image: u.Image,
		CreatedAt: jsTime(u.CreatedAt), UpdatedAt: jsTime(u.UpdatedAt),
	}
}

type sessionJSON struct {
	ID        string `json:"id"`
	Token     string `json:"token"`
	UserID    string `json:"userId"`
	ExpiresAt jsTime `json:"expiresAt"`
	CreatedAt jsTime `json:"createdAt"`
	UpdatedAt jsTime `json:"updatedAt"`
	IPAddress string `json:"ipAddress"`
	UserAgent string `json:"userAgent"`
}

func toSessionJSON(s Session) sessionJSON {
	return sessionJSON{
		ID: s.ID, Token: s.Token, UserID: s.UserID, ExpiresAt: jsTime(s.ExpiresAt),
		CreatedAt: jsTime(s.CreatedAt), UpdatedAt: jsTime(s.UpdatedAt), IPAddress: s.IPAddress, UserAgent: s.UserAgent,
	}
}
