package redisstore

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"breakwater/redisstore/redistest"
)

// Open's refusals: each a clear error that names the store (without its
// password) and leaves the database as it was.

// stKeys lists every key of every database of the server, with its value's
// type, for a before/after comparison.
func stKeys(t *testing.T, addr, password string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for db := range 16 {
		c := redis.NewClient(&redis.Options{Addr: addr, Password: password, DB: db})
		keys, err := c.Keys(ctx, "*").Result()
		if err != nil {
			c.Close()
			t.Fatalf("KEYS of db %d: %v", db, err)
		}
		for _, k := range keys {
			typ, _ := c.Type(ctx, k).Result()
			v, _ := c.Dump(ctx, k).Result()
			out = append(out, strconv.Itoa(db)+"/"+k+"/"+typ+"/"+strconv.Itoa(len(v)))
		}
		c.Close()
	}
	slices.Sort(out)
	return out
}

// stRefused opens url with mode, wants an error holding every one of
// want, naming the store and not holding secret.
func stRefused(t *testing.T, url string, mode Mode, secret string, want ...string) error {
	t.Helper()
	s, err := Open(context.Background(), url, mode)
	if err == nil {
		s.Close()
		t.Fatalf("Open(%s) succeeded, want it refused", url)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "store ") {
		t.Errorf("Open(%s): %q does not start by naming the store", url, msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("Open(%s): %q lacks %q", url, msg, w)
		}
	}
	if secret != "" && strings.Contains(msg, secret) {
		t.Errorf("Open(%s): the message shows the password: %q", url, msg)
	}
	return err
}

func stFreePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestOpenBadURL(t *testing.T) {
	t.Setenv(PasswordEnv, "")
	srv := redistest.Start(t)
	before := stKeys(t, srv.Addr, "")
	for _, tc := range []struct {
		name, url, secret string
		want              []string
	}{
		{"not a URL", "127.0.0.1:6379", "", []string{`store "127.0.0.1:6379"`, "want redis://"}},
		{"empty", "", "", []string{`store ""`, "want redis://"}},
		{"no host", "redis:///0", "", []string{"want redis://"}},
		{"http scheme", "http://" + srv.Addr + "/0", "", []string{"http://" + srv.Addr, "want redis://"}},
		{"http scheme with a password", "http://:pw-in-http@" + srv.Addr + "/0", "pw-in-http", []string{"want redis://"}},
		{"bad port", "redis://127.0.0.1:notaport/0", "", []string{"127.0.0.1:notaport", "want redis://"}},
		{"bad port with a password", "redis://:hunter2-port@127.0.0.1:notaport/0", "hunter2-port", []string{"want redis://"}},
		{"bad escape with a password", "redis://:hunter2-esc@" + srv.Addr + "/0%zz", "hunter2-esc", []string{"want redis://"}},
		{"bad database", "redis://" + srv.Addr + "/notadb", "", []string{"store redis://" + srv.Addr + "/notadb", "database"}},
		{"bad database with a password", "redis://:hunter2-db@" + srv.Addr + "/notadb", "hunter2-db", []string{"xxxxx", "database"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stRefused(t, tc.url, Create, tc.secret, tc.want...)
		})
	}
	if after := stKeys(t, srv.Addr, ""); !slices.Equal(before, after) {
		t.Errorf("refused URLs changed the server: %v -> %v", before, after)
	}
}

func TestOpenRefusedConnection(t *testing.T) {
	t.Setenv(PasswordEnv, "")
	addr := stFreePort(t)
	stRefused(t, "redis://"+addr+"/0", Create, "", "store redis://"+addr+"/0", "connection refused", "redis-server running")
	stRefused(t, "redis://:hunter2-refused@"+addr+"/0", Create, "hunter2-refused", "redis://:xxxxx@"+addr, "connection refused")
}

func TestOpenPasswords(t *testing.T) {
	const pw = "correct-horse-42"
	srv := redistest.Start(t, redistest.WithPassword(pw))
	before := stKeys(t, srv.Addr, pw)

	t.Setenv(PasswordEnv, "")
	// Wrong password in the URL.
	stRefused(t, "redis://:wrong-battery-7@"+srv.Addr+"/0", Create, "wrong-battery-7",
		"store redis://:xxxxx@"+srv.Addr+"/0", "wrong password", PasswordEnv)
	// No password at all.
	stRefused(t, "redis://"+srv.Addr+"/0", Create, "", "store redis://"+srv.Addr+"/0", "wants a password", PasswordEnv)
	// A wrong one from the environment.
	t.Setenv(PasswordEnv, "wrong-from-env-9")
	stRefused(t, "redis://"+srv.Addr+"/0", ReadOnly, "wrong-from-env-9", "wrong password")
	if after := stKeys(t, srv.Addr, pw); !slices.Equal(before, after) {
		t.Errorf("refused opens changed the server: %v -> %v", before, after)
	}

	// The right one from the environment works, and the URL's wins over it.
	t.Setenv(PasswordEnv, pw)
	s, err := Open(context.Background(), "redis://"+srv.Addr+"/0", Create)
	if err != nil {
		t.Fatalf("password from $%s: %v", PasswordEnv, err)
	}
	s.Close()
	t.Setenv(PasswordEnv, "wrong-from-env-9")
	s, err = Open(context.Background(), srv.URL(), Create)
	if err != nil {
		t.Fatalf("password in the URL, a wrong one in $%s: %v", PasswordEnv, err)
	}
	if strings.Contains(s.Path(), pw) || !strings.Contains(s.Path(), "xxxxx") {
		t.Errorf("Path() = %q shows the password", s.Path())
	}
	s.Close()
	if after := stKeys(t, srv.Addr, pw); !slices.Equal(before, after) {
		t.Errorf("an open of an empty store wrote to it: %v -> %v", before, after)
	}
}

func TestOpenForeignDatabase(t *testing.T) {
	t.Setenv(PasswordEnv, "")
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	// Another program's keys in db 0; db 1 holds another schema's marker.
	rdb.Set(ctx, "session:42", "x", 0)
	rdb.HSet(ctx, "user:1", "name", "ann")
	db1 := redis.NewClient(&redis.Options{Addr: srv.Addr, DB: 1})
	defer db1.Close()
	db1.Set(ctx, keySchema, "breakwater-fleet/999", 0)
	db1.Set(ctx, keySettings, "{}", 0)
	before := stKeys(t, srv.Addr, "")

	url0 := "redis://" + srv.Addr + "/0"
	url1 := "redis://" + srv.Addr + "/1"
	stRefused(t, url0, Create, "", "store "+url0, "holds 2 keys and no Breakwater crawl", "another program")
	stRefused(t, url0, ReadOnly, "", "store "+url0, "holds no Breakwater crawl", keySchema)
	for _, mode := range []Mode{Create, ReadOnly} {
		stRefused(t, url1, mode, "", "store "+url1, `another crawl's schema "breakwater-fleet/999"`, schemaMarker)
	}
	if after := stKeys(t, srv.Addr, ""); !slices.Equal(before, after) {
		t.Errorf("refused opens changed the server: %v -> %v", before, after)
	}

	// ReadOnly of an empty database (db 2) is refused, Create takes it and
	// writes nothing until the crawl's settings; then both open it.
	url2 := "redis://" + srv.Addr + "/2"
	stRefused(t, url2, ReadOnly, "", "store "+url2, "holds no Breakwater crawl")
	s, err := Open(ctx, url2, Create)
	if err != nil {
		t.Fatalf("Create on an empty database: %v", err)
	}
	if after := stKeys(t, srv.Addr, ""); !slices.Equal(before, after) {
		t.Errorf("Create on an empty database wrote to it: %v -> %v", before, after)
	}
	if err := s.PutSettings([]byte(`{"seeds":[]}`)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	db2 := redis.NewClient(&redis.Options{Addr: srv.Addr, DB: 2})
	defer db2.Close()
	if m, _ := db2.Get(ctx, keySchema).Result(); m != schemaMarker {
		t.Fatalf("PutSettings wrote marker %q, want %q", m, schemaMarker)
	}
	for _, mode := range []Mode{ReadOnly, Create} {
		s, err := Open(ctx, url2, mode)
		if err != nil {
			t.Fatalf("open a marked store (mode %d): %v", mode, err)
		}
		s.Close()
	}
}

func TestCheckVersion(t *testing.T) {
	info := func(v string) string {
		return "# Server\r\nredis_git_sha1:00000000\r\nredis_version:" + v + "\r\nredis_mode:standalone\r\nos:Linux\r\n"
	}
	for _, v := range []string{"7.0.15", "6.2", "6.2.0", "6.2.14", "7.2.4", "10.0.0", "6.10.1"} {
		if err := checkVersion(info(v)); err != nil {
			t.Errorf("Redis %s refused: %v", v, err)
		}
	}
	for _, v := range []string{"5.0.7", "6.0.20", "6.1.9", "4.0.14", "2.8"} {
		err := checkVersion(info(v))
		if err == nil {
			t.Errorf("Redis %s accepted, want refused (oldest %s)", v, MinVersion)
			continue
		}
		if !strings.Contains(err.Error(), "Redis "+v+" is too old") || !strings.Contains(err.Error(), MinVersion) {
			t.Errorf("Redis %s: %q does not name the version and the oldest accepted", v, err)
		}
	}
	if err := checkVersion("# Server\r\nos:Linux\r\n"); err == nil || !strings.Contains(err.Error(), "redis_version") {
		t.Errorf("INFO without redis_version: %v", err)
	}
	for _, tc := range []struct {
		a, b string
		less bool
	}{
		{"5.0.7", "6.2", true}, {"6.2", "6.2", false}, {"6.2.0", "6.2", false}, {"6.1.99", "6.2", true},
		{"10.0", "6.2", false}, {"6.10", "6.2", false}, {"7", "6.2", false},
	} {
		if got := versionLess(tc.a, tc.b); got != tc.less {
			t.Errorf("versionLess(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.less)
		}
	}
}

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		{"redis://:hunter2@127.0.0.1:6379/0", "redis://:xxxxx@127.0.0.1:6379/0"},
		{"redis://ann:hunter2@127.0.0.1:6379/3", "redis://ann:xxxxx@127.0.0.1:6379/3"},
		{"rediss://:hunter2@h:1/0?addr=h:2&addr=h:3", "rediss://:xxxxx@h:1/0?addr=h:2&addr=h:3"},
		{"redis://ann@127.0.0.1:6379/0", "redis://ann@127.0.0.1:6379/0"},
	} {
		if got := redact(tc.in); got != tc.want {
			t.Errorf("redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// A URL that does not parse may hold a password all the same.
	for _, in := range []string{
		"redis://:hunter2@127.0.0.1:notaport/0",
		"redis://ann:hunter2@[::1/0",
		"redis://:hunter2@127.0.0.1:6379/0%zz",
	} {
		if got := redact(in); strings.Contains(got, "hunter2") {
			t.Errorf("redact(%q) = %q shows the password", in, got)
		}
	}
}

// TestOpenEvictionPolicy: a crawl is refused on a Redis that may evict its
// queues (any allkeys-* policy), with a message naming the setting, and
// nothing is written; noeviction and the volatile-* policies (the crawl's
// queues and seen sets carry no expiry) are accepted. Reading commands
// open any store.
func TestOpenEvictionPolicy(t *testing.T) {
	t.Setenv(PasswordEnv, "")
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	url := "redis://" + srv.Addr + "/0"
	seed, err := Open(ctx, url, Create)
	if err != nil {
		t.Fatal(err)
	}
	if err := seed.PutSettings([]byte(`{"seeds":[]}`)); err != nil {
		t.Fatal(err)
	}
	seed.Close()
	for _, tc := range []struct {
		policy string
		ok     bool
	}{
		{"noeviction", true}, {"volatile-lru", true}, {"volatile-lfu", true}, {"volatile-ttl", true},
		{"volatile-random", true}, {"allkeys-lru", false}, {"allkeys-lfu", false}, {"allkeys-random", false},
	} {
		if err := rdb.ConfigSet(ctx, "maxmemory-policy", tc.policy).Err(); err != nil {
			t.Fatalf("CONFIG SET maxmemory-policy %s: %v", tc.policy, err)
		}
		before := stKeys(t, srv.Addr, "")
		if tc.ok {
			s, err := Open(ctx, url, Create)
			if err != nil {
				t.Errorf("maxmemory-policy %s refused: %v", tc.policy, err)
				continue
			}
			s.Close()
		} else {
			stRefused(t, url, Create, "", "store "+url, "maxmemory-policy is "+tc.policy, "noeviction")
			if after := stKeys(t, srv.Addr, ""); !slices.Equal(before, after) {
				t.Errorf("a refused open under %s changed the server", tc.policy)
			}
		}
		s, err := Open(ctx, url, ReadOnly)
		if err != nil {
			t.Errorf("a read-only open under %s: %v", tc.policy, err)
			continue
		}
		s.Close()
	}
	if err := evictionAllowed("# Memory\r\nused_memory:1\r\n"); err == nil || !strings.Contains(err.Error(), "maxmemory_policy") {
		t.Errorf("INFO without maxmemory_policy: %v", err)
	}
}

// A store of the previous layout is read as it is; a crawl upgrades it,
// unless a process of the older build is crawling it now (its heartbeat
// is fresh), which the refusal names.
func TestOpenUpgradesThePreviousLayout(t *testing.T) {
	t.Setenv(PasswordEnv, "")
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	url := srv.URL()
	rdb.Set(ctx, keySchema, previousSchemaMarker, 0)
	rdb.Set(ctx, keySettings, "{}", 0)
	srvMS := func() int64 { t, _ := rdb.Time(ctx).Result(); return t.UnixMilli() }
	rdb.HSet(ctx, keyProcs, "old-1", fmt.Sprintf(`{"instance":"x","server_ms":%d}`, srvMS()-2000))

	s, err := Open(ctx, url, ReadOnly)
	if err != nil {
		t.Fatalf("read-only open of the previous layout: %v", err)
	}
	s.Close()
	stRefused(t, url, Create, "", "store "+url, previousSchemaMarker, "old-1 (last heartbeat 2", "stop them")
	if m, _ := rdb.Get(ctx, keySchema).Result(); m != previousSchemaMarker {
		t.Fatalf("a refused upgrade left marker %q", m)
	}

	// The old process stopped long enough ago: the crawl upgrades.
	rdb.HSet(ctx, keyProcs, "old-1", fmt.Sprintf(`{"instance":"x","server_ms":%d}`, srvMS()-upgradeQuiet.Milliseconds()-1))
	s, err = Open(ctx, url, Create)
	if err != nil {
		t.Fatalf("upgrade with no live process of the old build: %v", err)
	}
	s.Close()
	if m, _ := rdb.Get(ctx, keySchema).Result(); m != schemaMarker {
		t.Fatalf("marker after the upgrade %q, want %q", m, schemaMarker)
	}
}
