package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed apply.lua
	applySource string
	//go:embed load.lua
	loadSource string
	//go:embed shard.lua
	shardSource string
	//go:embed lease.lua
	leaseSource string

	applyScript = redis.NewScript(applySource)
	loadScript  = redis.NewScript(loadSource)
	shardScript = redis.NewScript(shardSource)
	leaseScript = redis.NewScript(leaseSource)
)

// MinVersion is the oldest Redis the scripts are written for (the
// ZADD NX/XX flags, SET NX PX and cjson in scripts are older; 6.2 is the
// oldest still supported upstream).
const MinVersion = "6.2"

// PasswordEnv names the variable read for the password when the URL has none.
const PasswordEnv = "BREAKWATER_REDIS_PASSWORD"

// Store is one crawl's state in one Redis database (or Cluster).
type Store struct {
	rdb     redis.UniversalClient
	display string // the URL without its password, for messages
	// commands counts the commands sent, scripts' own calls not included:
	// the round trips a crawl costs Redis.
	commands atomic.Int64
}

// Mode says what Open may do to the store.
type Mode int

const (
	// ReadOnly opens a store that must hold a crawl already.
	ReadOnly Mode = iota
	// Create opens a store for a crawl: an empty database is marked as
	// this crawl's; one holding a crawl is resumed.
	Create
)

// Open connects to the store named by rawURL (redis://, rediss://, with
// ?addr=HOST:PORT repeated for a Cluster), checks that the server is
// recent enough and that the database holds this crawl's schema (or, with
// Create, nothing at all), and writes nothing else. Every error names the
// store.
func Open(ctx context.Context, rawURL string, mode Mode) (*Store, error) {
	redis.SetLogger(quietLogger{}) // its errors reach the caller, who says what failed and where
	rdb, display, err := connect(rawURL)
	if err != nil {
		return nil, err
	}
	s := &Store{rdb: rdb, display: display}
	rdb.AddHook(countingHook{&s.commands})
	if err := s.check(ctx, mode); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("store %s: %w", display, err)
	}
	return s, nil
}

// IsURL reports whether a --store value names a Redis store.
func IsURL(s string) bool {
	return strings.HasPrefix(s, "redis://") || strings.HasPrefix(s, "rediss://")
}

func connect(rawURL string) (redis.UniversalClient, string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || !IsURL(rawURL) || u.Host == "" {
		return nil, redact(rawURL), fmt.Errorf("store %q: want redis://[:PASSWORD@]HOST:PORT[/DB] or rediss://... (with ?addr=HOST:PORT for more Cluster nodes)", redact(rawURL))
	}
	display := redact(rawURL)
	if u.Query().Has("addr") {
		o, err := redis.ParseClusterURL(rawURL)
		if err != nil {
			return nil, display, fmt.Errorf("store %s: %w", display, err)
		}
		tune(&o.Password, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.MaxRetries)
		return redis.NewClusterClient(o), display, nil
	}
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, display, fmt.Errorf("store %s: %w", display, err)
	}
	tune(&o.Password, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.MaxRetries)
	return redis.NewClient(o), display, nil
}

// tune sets what a parsed URL leaves to the client: the password from
// the environment when the URL has none, short timeouts, and no retries
// inside the client (the writer retries whole batches; a retry inside
// would hide an outage from it).
func tune(password *string, dial, read, write *time.Duration, retries *int) {
	if *password == "" {
		*password = os.Getenv(PasswordEnv)
	}
	*dial, *read, *write = 3*time.Second, 5*time.Second, 5*time.Second
	*retries = -1
}

// redact drops the password from a store URL.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		// It may hold a password all the same: hide its user information.
		if i := strings.Index(raw, "://"); i >= 0 {
			rest := raw[i+3:]
			authority := rest[:strings.IndexAny(rest+"/", "/?#")]
			if j := strings.LastIndex(authority, "@"); j >= 0 {
				return raw[:i+3] + "xxxxx" + rest[j:]
			}
		}
		return raw
	}
	if u.User == nil {
		return raw
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

func (s *Store) check(ctx context.Context, mode Mode) error {
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return describeConnErr(err)
	}
	info, err := s.rdb.Info(ctx, "server").Result()
	if err != nil {
		return fmt.Errorf("read INFO server: %w", err)
	}
	if err := checkVersion(info); err != nil {
		return err
	}
	if mode == Create {
		if err := s.checkEviction(ctx); err != nil {
			return err
		}
	}
	marker, err := s.rdb.Get(ctx, keySchema).Result()
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		return fmt.Errorf("read %s: %w", keySchema, err)
	case marker == previousSchemaMarker && mode == Create:
		if err := s.upgrade(ctx); err != nil {
			return err
		}
		return s.loadScripts(ctx)
	case marker == previousSchemaMarker:
		return s.loadScripts(ctx) // read as it is (upgrade.go)
	case marker != schemaMarker:
		return fmt.Errorf("holds another crawl's schema %q (key %s); this build uses %q: use another database", marker, keySchema, schemaMarker)
	default:
		return s.loadScripts(ctx)
	}
	if mode == ReadOnly {
		return errors.New("holds no Breakwater crawl (no " + keySchema + " key)")
	}
	n, err := s.dbSize(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		// A process of the fleet started at the same time may have marked
		// the store (PutSettings writes the marker with its first keys)
		// between the read of the marker above and the count: read it again.
		if again, err := s.rdb.Get(ctx, keySchema).Result(); err == nil && again == schemaMarker {
			return s.loadScripts(ctx)
		}
		return fmt.Errorf("holds %d keys and no Breakwater crawl: it is another program's database; use an empty one", n)
	}
	// An empty store becomes this crawl's with its first write of the
	// crawl's settings (PutSettings): a run refused before then leaves it empty.
	return s.loadScripts(ctx)
}

func (s *Store) dbSize(ctx context.Context) (int64, error) {
	if c, ok := s.rdb.(*redis.ClusterClient); ok {
		var total atomic.Int64
		err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			n, err := m.DBSize(ctx).Result()
			total.Add(n)
			return err
		})
		return total.Load(), err
	}
	return s.rdb.DBSize(ctx).Result()
}

func describeConnErr(err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "WRONGPASS"), strings.Contains(msg, "invalid password"), strings.Contains(msg, "invalid username-password"):
		return fmt.Errorf("wrong password (from the URL or $%s): %w", PasswordEnv, err)
	case strings.Contains(msg, "NOAUTH"):
		return fmt.Errorf("the server wants a password: put it in the URL or in $%s: %w", PasswordEnv, err)
	case strings.Contains(msg, "connection refused"):
		return fmt.Errorf("connection refused: is redis-server running there? %w", err)
	}
	return fmt.Errorf("connect: %w", err)
}

// checkEviction refuses a server that may evict keys the crawl cannot
// lose: under an allkeys-* policy Redis drops queues and seen sets when
// it runs out of memory. The volatile-* policies evict only keys with an
// expiry, and the crawl's queues, seen sets and results have none (only
// caches do: robots.txt rules, idle breakers), so they are accepted, as
// is noeviction, where a full Redis refuses writes and the crawl waits.
// Every master of a Cluster is asked.
func (s *Store) checkEviction(ctx context.Context) error {
	check := func(ctx context.Context, c redis.Cmdable) error {
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			return fmt.Errorf("read INFO memory: %w", err)
		}
		return evictionAllowed(info)
	}
	if c, ok := s.rdb.(*redis.ClusterClient); ok {
		return c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			if err := check(ctx, m); err != nil {
				return fmt.Errorf("node %s: %w", m.Options().Addr, err)
			}
			return nil
		})
	}
	return check(ctx, s.rdb)
}

// evictionAllowed reads maxmemory_policy from INFO memory.
func evictionAllowed(info string) error {
	for _, line := range strings.Split(info, "\n") {
		policy, ok := strings.CutPrefix(strings.TrimSpace(line), "maxmemory_policy:")
		if !ok {
			continue
		}
		if policy == "noeviction" || strings.HasPrefix(policy, "volatile-") {
			return nil
		}
		return fmt.Errorf("maxmemory-policy is %s: Redis would evict the crawl's queues and seen sets when full; "+
			"set maxmemory-policy to noeviction (redis.conf, or CONFIG SET maxmemory-policy noeviction)", policy)
	}
	return errors.New("INFO memory names no maxmemory_policy")
}

// checkVersion reads redis_version from INFO server.
func checkVersion(info string) error {
	for _, line := range strings.Split(info, "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:")
		if !ok {
			continue
		}
		if versionLess(v, MinVersion) {
			return fmt.Errorf("Redis %s is too old for the crawl's scripts: want %s or later", v, MinVersion)
		}
		return nil
	}
	return errors.New("INFO server names no redis_version")
}

func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		x, y := part(as, i), part(bs, i)
		if x != y {
			return x < y
		}
	}
	return false
}

func part(p []string, i int) int {
	if i >= len(p) {
		return 0
	}
	n, _ := strconv.Atoi(p[i])
	return n
}

// Close closes the connections.
func (s *Store) Close() error { return s.rdb.Close() }

// Path names the store, without its password.
func (s *Store) Path() string { return s.display }

// Client is the store's connection, for the breakers.
func (s *Store) Client() redis.UniversalClient { return s.rdb }

// Commands is the number of commands sent so far (a script call is one).
func (s *Store) Commands() int64 { return s.commands.Load() }

// countingHook counts commands, each command of a pipeline included.
type countingHook struct{ n *atomic.Int64 }

func (h countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// quietLogger drops go-redis's own log lines (a failed dial, five times).
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
