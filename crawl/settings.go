package crawl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"breakwater/control"
	"breakwater/store"
)

// The crawl's stored settings are one JSON object keyed by flag name: the
// value of every Stored flag of the settings table (flags.go), and the
// seeds' hosts under seedHostsKey. The first run stores them and every
// later run uses them unless its flags say otherwise; a change is logged,
// and status shows them, under the name the user typed. Durations are
// stored as their text ("1m30s"), lists as arrays of strings, so the file
// reads as the command line.

// seedHostsKey holds the hosts of every seed ever given: the crawl's
// scope when Scope is ScopeSeeds or ScopeDomain.
const seedHostsKey = "seed_hosts"

// SettingChange is one stored setting a run's flag changed.
type SettingChange struct {
	Flag     string
	Old, New json.RawMessage
}

// ResolveFlags merges the settings stored in db into v. A stored setting
// whose flag was given (given(flag) is true) keeps v's value, which
// replaces the stored one from now on; every other setting the crawl has
// comes from the crawl. Settings the crawl does not have yet (a new
// crawl, or one older than them) keep v's value, and are stored from now
// on. Flags that are not stored are v's alone. It returns the stored
// settings the flags changed. Nothing is written: New stores the merged
// settings, with the seeds' hosts, in one write once every check has
// passed, so a run refused for bad input changes nothing and a kill
// cannot leave half of them stored.
func ResolveFlags(db interface{ Settings() ([]byte, error) }, v *FlagValues, given func(flag string) bool) ([]SettingChange, error) {
	stored, err := db.Settings()
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("read stored crawl settings: %w", err)
	}
	merged, changes, err := mergeSettings(stored, v, given)
	if err != nil {
		return nil, err
	}
	if err := v.Options.Validate(); err != nil {
		return nil, fmt.Errorf("the crawl's settings, stored and given: %w", err)
	}
	v.Options.settings = merged
	v.Options.settingsRead = map[string]json.RawMessage{}
	if len(stored) > 0 {
		json.Unmarshal(stored, &v.Options.settingsRead) // mergeSettings read it
	}
	v.Options.settingsGiven = map[string]bool{}
	for _, f := range flagTable {
		if f.Stored && given(f.Name) {
			v.Options.settingsGiven[f.Name] = true
		}
	}
	return changes, nil
}

// ResolveSettings is ResolveFlags for a caller with Options alone (the
// command's own flags at their defaults): it returns the options in force.
func ResolveSettings(db interface{ Settings() ([]byte, error) }, opts Options, given func(flag string) bool) (Options, []SettingChange, error) {
	v := DefaultFlagValues()
	v.Options = opts
	changes, err := ResolveFlags(db, &v, given)
	if err != nil {
		return opts, nil, err
	}
	return v.Options, changes, nil
}

// StoredFlagValues returns the flag values a crawl's stored settings give
// over the defaults: those a run that gives no flag uses.
func StoredFlagValues(stored []byte) (FlagValues, error) {
	v := DefaultFlagValues()
	_, _, err := mergeSettings(stored, &v, func(string) bool { return false })
	return v, err
}

// mergeSettings merges the stored settings into v, flag by flag, and
// returns the settings to store: every stored flag's value in force, and
// the stored seed hosts.
func mergeSettings(stored []byte, v *FlagValues, given func(string) bool) (map[string]json.RawMessage, []SettingChange, error) {
	old := map[string]json.RawMessage{}
	if len(stored) > 0 {
		if err := json.Unmarshal(stored, &old); err != nil {
			return nil, nil, fmt.Errorf("read stored crawl settings: %w", err)
		}
	}
	merged := map[string]json.RawMessage{}
	var changes []SettingChange
	for _, f := range flagTable {
		if !f.Stored {
			continue
		}
		ov, was := old[f.Name]
		switch {
		case was && !given(f.Name):
			if err := decodeSetting(f.Name, f.field(v), ov); err != nil {
				return nil, nil, err
			}
		case was:
			// Compared as values, so an older file's spelling of the same
			// value ("null" for an empty list) is no change.
			scratch := DefaultFlagValues()
			if decodeSetting(f.Name, f.field(&scratch), ov) != nil ||
				!bytes.Equal(encodeSetting(f.field(&scratch)), encodeSetting(f.field(v))) {
				changes = append(changes, SettingChange{Flag: f.Name, Old: ov, New: encodeSetting(f.field(v))})
			}
		}
		merged[f.Name] = encodeSetting(f.field(v))
	}
	if hosts, ok := old[seedHostsKey]; ok {
		merged[seedHostsKey] = hosts
	}
	return merged, changes, nil
}

// encodeSetting is the stored form of the value at p, a field of
// FlagValues.
func encodeSetting(p any) json.RawMessage {
	var out []byte
	switch p := p.(type) {
	case *time.Duration:
		out, _ = json.Marshal(p.String())
	case *[]string:
		out, _ = json.Marshal(append([]string{}, *p...))
	case *[]*regexp.Regexp:
		out, _ = json.Marshal(patterns(*p))
	default:
		out, _ = json.Marshal(p)
	}
	return out
}

// decodeSetting sets the field at p to the stored value raw of flag.
func decodeSetting(flag string, p any, raw json.RawMessage) error {
	var err error
	switch p := p.(type) {
	case *time.Duration:
		var s string
		if err = json.Unmarshal(raw, &s); err == nil {
			*p, err = time.ParseDuration(s)
		}
	case *[]string:
		var list []string
		if err = json.Unmarshal(raw, &list); err == nil {
			*p = list
		}
	case *[]*regexp.Regexp:
		var list []string
		if err = json.Unmarshal(raw, &list); err != nil {
			break
		}
		res := []*regexp.Regexp{}
		for _, x := range list {
			re, err := regexp.Compile(x)
			if err != nil {
				return fmt.Errorf("stored --%s %q: %w", flag, x, err)
			}
			res = append(res, re)
		}
		*p = res
	default:
		err = json.Unmarshal(raw, p)
	}
	if err != nil {
		return fmt.Errorf("read stored crawl settings: --%s %s: %w", flag, raw, err)
	}
	return nil
}

// LogSettingChanges logs each change as old -> new, secret values masked.
func LogSettingChanges(log *slog.Logger, changes []SettingChange) {
	for _, c := range changes {
		log.Info("crawl setting changed", "setting", c.Flag,
			"old", string(control.MaskSetting(c.Flag, c.Old)), "new", string(control.MaskSetting(c.Flag, c.New)))
	}
}
