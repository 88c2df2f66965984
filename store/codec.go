package store

import (
	"encoding/json"
	"fmt"

	"breakwater/breaker"
	"breakwater/robots"
)

// The encodings of the small keyed and logged records. Breaker state,
// transitions and cases are JSON: a breaker.Breaker is marshalled as it is
// (its exported fields are its stored form), a Transition and a Case by
// their field tags. Robots rules keep the robots package's versioned binary
// layout. Items and Results, written by the million, have their own binary
// encodings in item.go and result.go.
//
// Every decoding error names the record and its host or sequence number.

// EncodeBreaker is the stored form of the record; see the top of this file.
func EncodeBreaker(host string, b breaker.Breaker) ([]byte, error) {
	data, err := json.Marshal(&b)
	if err != nil {
		return nil, fmt.Errorf("encode breaker of %s: %w", host, err)
	}
	return data, nil
}

// DecodeBreaker is the stored form of the record; see the top of this file.
func DecodeBreaker(host string, data []byte) (breaker.Breaker, error) {
	var b breaker.Breaker
	if err := json.Unmarshal(data, &b); err != nil {
		return breaker.Breaker{}, fmt.Errorf("decode breaker of %s: %w", host, err)
	}
	return b, nil
}

// EncodeTransition is the stored form of the record; see the top of this file.
func EncodeTransition(t Transition) ([]byte, error) {
	data, err := json.Marshal(&t)
	if err != nil {
		return nil, fmt.Errorf("encode transition of %s: %w", t.Host, err)
	}
	return data, nil
}

// DecodeTransition is the stored form of the record; see the top of this file.
func DecodeTransition(seq uint64, data []byte) (Transition, error) {
	var t Transition
	if err := json.Unmarshal(data, &t); err != nil {
		return Transition{}, fmt.Errorf("decode transition %d: %w", seq, err)
	}
	return t, nil
}

// EncodeCase is the stored form of the record; see the top of this file.
func EncodeCase(c Case) ([]byte, error) {
	data, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("encode case of %s: %w", c.Host, err)
	}
	return data, nil
}

// DecodeCase is the stored form of the record; see the top of this file.
func DecodeCase(seq uint64, data []byte) (Case, error) {
	var c Case
	if err := json.Unmarshal(data, &c); err != nil {
		return Case{}, fmt.Errorf("decode case %d: %w", seq, err)
	}
	return c, nil
}

// EncodeRobots is the stored form of the record; see the top of this file.
func EncodeRobots(host string, r *robots.Rules) ([]byte, error) {
	data, err := r.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("encode robots.txt of %s: %w", host, err)
	}
	return data, nil
}

// DecodeRobots is the stored form of the record; see the top of this file.
func DecodeRobots(host string, data []byte) (*robots.Rules, error) {
	r, err := robots.Unmarshal(data)
	if err != nil {
		return nil, fmt.Errorf("decode robots.txt of %s: %w", host, err)
	}
	return r, nil
}
