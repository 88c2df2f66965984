package store

import (
	"time"

	"breakwater/breaker"
)

// Transition is one breaker transition as logged in the transitions bucket.
type Transition struct {
	At     time.Time `json:"at"`
	Host   string    `json:"host"`
	From   string    `json:"from"`
	To     string    `json:"to"`
	Hold   string    `json:"hold,omitempty"`
	Class  string    `json:"class,omitempty"`
	Detail string    `json:"detail,omitempty"`
	Reason string    `json:"reason,omitempty"`
	// Generation is the breaker's generation after the transition: one
	// host's transitions are ordered by it. Zero in records written before
	// it was logged.
	Generation uint64 `json:"generation,omitempty"`
}

// NewTransition converts a breaker transition to its logged form, in UTC.
func NewTransition(t breaker.Transition) Transition {
	return Transition{At: t.At.UTC(), Host: t.Host, From: t.From.String(), To: t.To.String(),
		Hold: t.Hold.String(), Class: string(t.Class), Detail: t.Detail, Reason: t.Reason,
		Generation: t.Generation}
}

// Case is a refusal that names the crawler, kept for a human: the host is
// held open until someone resolves it. A zero Resolved means still open.
type Case struct {
	Host     string    `json:"host"`
	At       time.Time `json:"at"`
	URL      string    `json:"url"`
	Status   int       `json:"status"`
	Excerpt  string    `json:"excerpt"`
	Resolved time.Time `json:"resolved,omitzero"`
}
