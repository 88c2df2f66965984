package frontier

import "breakwater/storage"

// NewItem prepares a URL for the frontier: its dedupe hash comes from the
// canonical form, while the URL itself is kept as written, since that is
// what gets fetched.
func NewItem(rawURL string, depth, redirects int) (storage.Item, error) {
	canonical, host, err := canonicalWithHost(rawURL)
	if err != nil {
		return storage.Item{}, err
	}
	return storage.Item{Host: host, URL: rawURL, Hash: storage.HashOf(canonical), Depth: depth, Redirects: redirects}, nil
}
