package crawl

import (
	"fmt"
	"testing"
	"testing/synctest"
)

// The user's credentials go to the seeds' hosts only (the stored seed_hosts,
// host keys): the seed's own pages and robots.txt carry them, a link that
// names its host another way (SEED.test:80) too; a linked page of another
// host, the same name on another port (another host key),
// the target of a redirect to another host, and the robots.txt redirect
// hop to another host leave them out. With HeaderHostsAll only the hop
// does.
func TestCredentialsForSeedHostsOnly(t *testing.T) {
	for _, all := range []bool{false, true} {
		t.Run(fmt.Sprintf("all=%v", all), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := site{
					"http://seed.test/robots.txt": redirectPage(302, "http://hop.test/robots.txt"),
					"http://hop.test/robots.txt":  {status: 200, body: "User-agent: *\nAllow: /\n"},
					"http://seed.test/":           htmlPage("seed", "/a?q=1", "http://other.test/b", "http://seed.test:8080/c", "/r", "http://SEED.test:80/d"),
					"http://seed.test/r":          redirectPage(302, "http://landing.test/"),
				}
				opts := rigOptions("http://seed.test/")
				opts.Scope = ScopeAny
				if all {
					opts.HeaderHosts = HeaderHostsAll
				}
				r := newRig(t, opts, siteFetcher(s))
				if sum := r.run(); !sum.Exhausted {
					t.Fatalf("summary %+v, want exhausted", sum)
				}
				want := map[string]bool{ // URL -> leaves the credentials out
					"http://seed.test/robots.txt": false, "http://seed.test/": false,
					"http://seed.test/a?q=1": false, "http://seed.test/r": false, "http://seed.test/d": false,
					"http://hop.test/robots.txt":       true,
					"http://other.test/robots.txt":     !all,
					"http://other.test/b":              !all,
					"http://seed.test:8080/robots.txt": !all,
					"http://seed.test:8080/c":          !all,
					"http://landing.test/robots.txt":   !all,
					"http://landing.test/":             !all,
				}
				got := map[string]bool{}
				for _, q := range r.f.requests("") {
					got[q.URL] = q.WithoutSecrets
				}
				for u, without := range want {
					if g, ok := got[u]; !ok || g != without {
						t.Errorf("%s: asked %v, without the credentials %v; want asked, without them %v", u, ok, g, without)
					}
				}
				if len(got) != len(want) {
					t.Errorf("asked for %v, want %v", sortedKeys(got), sortedKeys(want))
				}
			})
		})
	}
}
