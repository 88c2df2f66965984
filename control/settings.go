package control

import (
	"encoding/json"
	"net/url"
	"strings"

	"breakwater/fetch"
)

// A Mask returns a stored setting's JSON value fit to show. The crawl
// keeps secret values as given; only what is shown is masked.
type Mask func(value json.RawMessage) json.RawMessage

// secretSettings maps each secret stored setting, by flag name, to its
// mask. The crawl's settings table declares which settings are secret and
// hands them over with SetSecretSettings when its package is loaded; until
// then (a program without the crawl package) every value is masked.
var secretSettings map[string]Mask

// SetSecretSettings declares the secret stored settings and their masks.
// It is meant to be called once, by the settings table, at package
// initialisation, before any status is read.
func SetSecretSettings(masks map[string]Mask) { secretSettings = masks }

// MaskSetting returns a stored setting's JSON value fit to show: a secret
// setting's through its mask, any other as stored.
func MaskSetting(flag string, value json.RawMessage) json.RawMessage {
	if secretSettings == nil {
		return json.RawMessage(`"(masked: the secret settings are not known)"`)
	}
	if mask := secretSettings[flag]; mask != nil {
		return mask(value)
	}
	return value
}

// MaskSettings masks every setting of a stored settings blob (see
// MaskSetting).
func MaskSettings(blob []byte) (map[string]json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if err := json.Unmarshal(blob, &m); err != nil {
		return nil, err
	}
	for k, v := range m {
		m[k] = MaskSetting(k, v)
	}
	return m, nil
}

// MaskHeaders masks the values of the secret headers (Authorization,
// Cookie, tokens: fetch.IsSecretHeader) in a list of "Name: value" lines.
func MaskHeaders(value json.RawMessage) json.RawMessage {
	var hs []string
	if json.Unmarshal(value, &hs) != nil {
		return value
	}
	for i, h := range hs {
		name, v, ok := strings.Cut(h, ":")
		if ok && fetch.IsSecretHeader(strings.TrimSpace(name)) {
			hs[i] = name + ": " + fetch.MaskValue(strings.TrimSpace(v))
		}
	}
	out, _ := json.Marshal(hs)
	return out
}

// MaskURLPassword masks a URL's password (a proxy's credentials); the
// user name, host and port stay, so the setting can still be recognised.
func MaskURLPassword(value json.RawMessage) json.RawMessage {
	var raw string
	if json.Unmarshal(value, &raw) != nil {
		return value
	}
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			out, _ := json.Marshal(u.Redacted())
			return out
		}
	}
	return value
}

// MaskURLPath masks everything of a URL but its scheme and host: a
// webhook's path and query are often its only credential (a token in the
// path, as chat services issue them). A URL that cannot be parsed is
// masked whole.
func MaskURLPath(value json.RawMessage) json.RawMessage {
	var raw string
	if json.Unmarshal(value, &raw) != nil || raw == "" {
		return value
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		out, _ := json.Marshal(fetch.MaskValue(raw))
		return out
	}
	shown := u.Scheme + "://" + u.Host
	if rest := strings.TrimPrefix(raw, shown); rest != "" && rest != "/" || u.User != nil {
		shown = u.Scheme + "://" + u.Host + "/xxxxx"
	}
	out, _ := json.Marshal(shown)
	return out
}
