package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A store of the previous layout (previousSchemaMarker) holds nothing
// this build cannot read: what it lacks (lease tokens, the refresh index,
// the page budget) is made as the crawl goes. But the builds before fence
// no write, so the two must never crawl one store at once. A crawl
// upgrades the marker only while no heartbeat of the last upgradeQuiet
// says a process of the old build is crawling; older builds then refuse
// the store, as any build refuses a layout it does not know.

const (
	previousSchemaMarker = "breakwater-fleet/1"
	upgradeQuiet         = time.Minute
)

// upgradeScript: KEYS[1] the schema marker, KEYS[2] the procs hash;
// ARGV[1] the old marker, ARGV[2] the new, ARGV[3] quiet (ms). Replies
// {1} when upgraded (or already), else {0, id, age ms, ...} of the live.
var upgradeScript = redis.NewScript(`
local marker = redis.call('GET', KEYS[1])
if marker == ARGV[2] then return {1} end
if marker ~= ARGV[1] then return redis.error_reply('the store changed its schema marker meanwhile') end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local live = {0}
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local ok, beat = pcall(cjson.decode, all[i + 1])
  local at = 0
  if ok and type(beat) == 'table' then at = tonumber(beat.server_ms or 0) or 0 end
  if now - at < tonumber(ARGV[3]) then
    live[#live + 1] = all[i]
    live[#live + 1] = now - at
  end
end
if #live > 1 then return live end
redis.call('SET', KEYS[1], ARGV[2])
return {1}
`)

// upgrade moves a store of the previous layout to this build's.
func (s *Store) upgrade(ctx context.Context) error {
	res, err := upgradeScript.Run(ctx, s.rdb, []string{keySchema, keyProcs}, previousSchemaMarker, schemaMarker, ms(upgradeQuiet)).Slice()
	if err != nil {
		return fmt.Errorf("upgrade the store from %q to %q: %w", previousSchemaMarker, schemaMarker, err)
	}
	if ok, _ := res[0].(int64); ok == 1 {
		slog.Info("the store was upgraded to this build's layout", "store", s.display, "from", previousSchemaMarker, "to", schemaMarker)
		return nil
	}
	var live []string
	for i := 1; i+1 < len(res); i += 2 {
		id, _ := res[i].(string)
		age, _ := res[i+1].(int64)
		live = append(live, fmt.Sprintf("%s (last heartbeat %s ago)", id, (time.Duration(age)*time.Millisecond).Round(time.Millisecond)))
	}
	return fmt.Errorf("holds a crawl of an older build's layout %q that processes of that build are crawling now: %s; stop them, then start this build, which upgrades the store to %q (the older build then refuses it)",
		previousSchemaMarker, strings.Join(live, ", "), schemaMarker)
}
