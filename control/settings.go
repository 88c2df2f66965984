package control

import (
	"encoding/json"
	"net/url"
	"strings"

	"breakwater/fetch"
)

// MaskSetting returns a stored setting's JSON value fit to show: the values
// of secret headers (Authorization, Cookie, tokens) and a proxy's password
// are masked. The file keeps them as given; only what is shown is masked.
func MaskSetting(flag string, value json.RawMessage) json.RawMessage {
	switch flag {
	case "header":
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
	case "proxy":
		var p string
		if json.Unmarshal(value, &p) != nil {
			return value
		}
		if u, err := url.Parse(p); err == nil && u.User != nil {
			if _, has := u.User.Password(); has {
				u.User = url.UserPassword(u.User.Username(), "xxxxx")
				out, _ := json.Marshal(u.Redacted())
				return out
			}
		}
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
