// Package breaker owns the per-host circuit breakers: the decision whether
// to attempt a host at all, as opposed to backoff's decision of how long to
// wait before the next attempt on one URL.
//
// # Basics
//
// A Breaker is one host's circuit, a plain value whose methods are pure
// functions of (breaker, classified outcome, now). It is fed Classes, never
// raw statuses: Transient failures count, Permanent and Throttled are
// neutral, a Refused that names the crawler opens the circuit at once and
// holds it with a case for a person.
//
//	Closed   --Threshold consecutive Transient-->  Open (rest)
//	Open     --now >= OpenedAt+Rest, not held-->   HalfOpen
//	HalfOpen --Probes consecutive probe OKs-->     Closed (rest ladder reset)
//	HalfOpen --Transient probe-->                  Open (fresh rest, doubled up to RestMax)
//	HalfOpen --Throttled/Permanent probe-->        HalfOpen (DownSince = now, no transition)
//	any      --Refused-->                          Open, held (+Case)
//	any      --Registry.Pause-->                   Open, held (+Paused)
//	held     --ResolveCase (-Case) / Unpause (-Paused)-->
//	                 Open, held   if a hold remains
//	                 HalfOpen     if none remains (DownSince = now)
//
// The two holds are independent flags of Hold: an operator's pause
// (Paused, its reason in PauseReason) and a case (Case, the refusal's
// detail in HoldReason). A host may have both (Paused|Case, "case+paused");
// Refused adds Case and Pause adds Paused whatever else holds it, and
// ResolveCase and Unpause each remove only their own. Adding or removing a
// hold is a transition even when the State stays Open.
//
// A Registry holds the breakers of one process. A worker calls Admit before
// a request (after the authorisation check, before the rate limiter, so an
// open host never spends a token) and Report with the returned Ticket
// afterwards. A refused Decision carries RetryAt: the caller defers the URL
// until then rather than failing it; a held host has no RetryAt and waits
// for a person. There is no force-close.
//
// # Invariants
//
//   - Memory is proportional to trouble: a closed breaker with no failures
//     and no hold has no entry, so a crawl of healthy hosts leaves the map
//     empty, and an absent host reads as the zero (closed) Breaker.
//   - A held breaker is Open and is never admitted, probed or closed by
//     time or outcomes.
//   - A half-open host has at most one outstanding probe. A probe that
//     never reports stops blocking at admitted-at + ProbeTimeout, so no
//     host stays stuck half-open.
//   - Every transition (change of State or Hold) increments Generation.
//   - A held breaker goes half-open only when its last hold is released.
//   - While a circuit is not closed, DownSince is when the host was last
//     known to answer: the open from closed sets it, and a release and a
//     probe answered with Throttled or Permanent (a 429, a 404: the host
//     is alive, only unwilling) restart it without a transition. GiveUp
//     counts from it, so a host that keeps answering its probes with 429
//     is never given up on as unreachable.
//
// # Stale tickets
//
// Every Ticket carries the generation it was admitted under. What counts:
//
//   - Half-open takes only probe tickets of its own generation: a slow
//     success started before the circuit opened cannot close it, a slow
//     failure from before cannot reopen it, and only the outstanding probe
//     itself frees the probe gate.
//   - Open takes nothing (nothing was admitted under its generation).
//   - Closed takes every non-probe ticket, whatever its generation.
//
// The closed rule follows from eviction. A close leaves the breaker clean,
// so its entry is evicted and every closed period begins with the host
// absent, and absence forgets generations: a request admitted before the
// host got an entry must still count once it has one. So a request started
// before an earlier open-and-recover cycle may, at worst, add one closed
// failure or reset the count once. That cannot matter in practice: such a
// request cannot outlive the request timeout, while a cycle lasts at least
// a rest plus the probes, and it can never decide a probe. What must not
// happen is an old probe ticket matching a new half-open generation after
// its entry was evicted and recreated, so a new entry's generations start
// above every generation an evicted entry reached.
//
// Refused is the exception to generations: it is a message about the
// crawler, not a sample of the host's health, so a late refusal still opens
// a case (on a paused host too, which then keeps its pause as well).
//
// # Persistence
//
// Breaker fields are exported so that another package can store them.
// TakeDirty hands over what changed and what was evicted since the last
// call (write-through), or TakeDirtyHosts their names, to be read with
// Visit when written; Load restores an entry at startup without firing a
// transition. The probe gate is not persisted: it starts free. A loader
// passes each stored breaker through Breaker.Resumed first, so that the
// hours the crawler was not running do not count as a host's downtime (its
// rest, though, passes in wall time).
//
// # Concurrency
//
// A Registry is safe for concurrent use by many goroutines. One sync.Mutex
// guards its map; critical sections are a map lookup and a few field
// updates, with no I/O and no callbacks. Transitions reach the
// onTransition callback in the order they were committed (globally, so
// one host's in increasing Generation), one at a time, and never under the
// lock: a transition is queued under the lock, and after unlocking the
// goroutine that caused it delivers the queue, unless another goroutine is
// delivering already, in which case that one delivers it and the caller
// returns at once. So with no competition the callback has run before
// Admit, Report, Pause, Unpause or ResolveCase returns; under contention it
// may run a little later, on another goroutine. A callback may call back
// into the Registry, even to cause another transition: that call returns
// without waiting, and its transition is delivered after the current
// callback returns. A slow callback delays later transitions and the
// goroutine delivering them, but no other caller. Time is always passed in:
// nothing in this package reads the clock.
//
// Config.Disabled turns the automatic breaker off (every unheld host is
// allowed, Report ignores every class but Refused, GiveUp is always false)
// but holds still apply: a Refused report opens and holds a case exactly as
// when enabled, operator pauses hold, and both are released as usual.
package breaker
