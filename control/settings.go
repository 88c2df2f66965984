package control

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
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
			if ok && secretHeader(name) {
				hs[i] = name + ": " + maskValue(strings.TrimSpace(v))
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

// secretHeader and maskValue stand in until fetch has them.
func secretHeader(name string) bool {
	n := strings.ToLower(strings.TrimSpace(name))
	return n == "authorization" || n == "cookie" || n == "proxy-authorization" ||
		strings.Contains(n, "token") || strings.Contains(n, "secret") || strings.Contains(n, "api-key") || strings.Contains(n, "apikey")
}

func maskValue(v string) string {
	if v == "" {
		return ""
	}
	return v[:min(3, len(v))] + "…(" + strconv.Itoa(len(v)) + " bytes)"
}
