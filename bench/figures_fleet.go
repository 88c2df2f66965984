package bench

import (
	"breakwater/redisstore"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// TargetFleetRatio is the fleet's target: the most processes on Redis
// together reach this share of one process's pages/s on bbolt.
const TargetFleetRatio = 0.80

const fleetMethod = "real `breakwater crawl` processes of this binary over the crawl section's site from its " +
	"roots, with one seeds file and the crawl section's flags: one process on a new bbolt file (--db), then " +
	"fleets on one Redis (--store, distinct --fleet-id), flushed before each run, a fleet's processes started " +
	"together; each run is done once a pass, passes interleaved, and the pass of median wall time is shown. " +
	"Wall time runs from the first start to the last exit. Pages are the distinct pages the site served."

func (r *Report) fleetSection() *Section {
	f := r.Fleet
	if f == nil {
		return nil
	}
	s := &Section{Name: SectionFleet, Method: fleetMethod}
	if f.Skipped != "" {
		s.Figures = []Figure{text("not run", f.Skipped, "the section needs Redis: --store auto starts a "+
			"redis-server of its own (redis-server must be installed), --store redis://HOST:PORT/DB uses that "+
			"database, which must be empty or hold only a Breakwater crawl; --only fleet implies --store auto")}
		return s
	}
	store := f.Store
	if f.Auto {
		store += " (a redis-server the bench started, no snapshots, no append-only file)"
	}
	s.Settings = []Setting{set("site", f.Site), set("workers", f.Workers), set("host concurrency", f.HostConcurrency),
		set("hosts a process holds", redisstore.HostsFor(f.Workers, f.HostConcurrency)), set("store", store),
		set("redis", f.RedisVersion), set("passes", f.Passes)}
	for _, run := range f.Runs {
		if len(run.Passes) > 0 {
			s.Figures = append(s.Figures, run.figures()...)
		}
	}
	if big := f.Biggest(); big != nil && f.FleetToBolt > 0 {
		s.Figures = append(s.Figures, num("largest fleet / 1 process on bbolt, pages/s", Share, f.FleetToBolt,
			"the median passes' pages/s of the most processes on Redis over one process's on bbolt").
			want(AtLeast, TargetFleetRatio))
	}
	if b, big := f.Bolt(), f.Biggest(); b != nil && big != nil && b.MaxPerSec > 0 && len(b.Passes) > 1 {
		s.Figures = append(s.Figures, num("largest fleet / 1 process on bbolt, best pass of each", Share,
			big.MaxPerSec/b.MaxPerSec, ""))
	}
	if f.RedisToBolt > 0 {
		s.Figures = append(s.Figures, num("1 process on Redis / 1 on bbolt, pages/s", Share, f.RedisToBolt, "what the store costs"))
	}
	if f.Idle != nil {
		s.Figures = append(s.Figures, num("an idle process: Redis commands a second, server INFO", PerSecond, f.Idle.PerSec,
			fmt.Sprintf("one process whose crawl's only host another holds, waiting for work: total_commands_processed "+
				"over %s (every command its scripts run counted), less the bench's own INFO", f.Idle.Window.Round(time.Second))).
			want(AtMost, TargetIdleCommands))
	}
	s.Figures = append(s.Figures, f.healthFigures()...)
	return s
}

// figures are one configuration's: its median pass, and its passes' rates.
func (fr *FleetRun) figures() []Figure {
	g := fr.Name() + ": "
	p := fr.Pass()
	rates := make([]float64, len(fr.Passes))
	for i, q := range fr.Passes {
		rates[i] = q.PagesPerSec
	}
	figs := []Figure{
		num(g+"distinct pages/s", PagesPerSec, p.PagesPerSec, "distinct pages served over the wall time").over(rates),
		num(g+"pages", Count, p.Traffic.DistinctPages, ""),
		secsOf(g+"wall", p.Wall, ""),
	}
	if p.CrawlCPU > 0 {
		figs = append(figs, secsOf(g+"processes' CPU", p.CrawlCPU, "user + system (rusage), start-up included: "+
			"unlike wall time it hardly depends on what else the machine runs"))
		if fr.Store == "redis" {
			figs = append(figs, secsOf(g+"Redis CPU", p.ServerCPU, "INFO cpu's used_cpu_user + used_cpu_sys over the run"))
		}
		figs = append(figs, num(g+"pages per CPU-second", PagesPerSec, p.PagesPerCPUSec(), "pages over the processes' and Redis's CPU time"))
	}
	if fr.Store == "redis" {
		figs = append(figs,
			num(g+"Redis commands, processes' logs", Count, p.LogCommands, "the processes' \"fleet store commands\" "+
				"lines summed: each pipelined command counted, a script call 1"),
			num(g+"Redis commands, server INFO", Count, p.ServerCommands, "total_commands_processed over the run, less "+
				"the bench's own INFO: every command a script runs, each handshake and script load counted too"),
			num(g+"commands per page, processes' logs", PerPage, p.CommandsPerPage(false), ""),
			num(g+"commands per page, server INFO", PerPage, p.CommandsPerPage(true), ""))
		if p.ServerCPU > 0 {
			figs = append(figs, num(g+"pages per Redis CPU-second", PagesPerSec, p.PagesPerServerSec(),
				"what one Redis core could carry at this cost per page, an estimate"))
		}
	}
	if fr.Procs > 1 {
		each := make([]string, len(p.Procs))
		for i, pr := range p.Procs {
			each[i] = strconv.FormatInt(pr.Fetched, 10)
		}
		figs = append(figs, num(g+"fewest pages of one process, any pass", Count, fr.Fewest(), "a process holds "+
			"at most the hosts with work its workers keep busy twice over (settings), so on a small site the "+
			"processes that start first can hold every host: 0 is the design, not a fault").
			listing("median pass "+strings.Join(each, " / ")).want(AtLeast, 1))
	}
	return figs
}

// healthFigures are what went wrong in any pass of any run.
func (f *FleetResult) healthFigures() []Figure {
	warnings, errs := 0, 0
	var troubled []string
	for _, run := range f.Runs {
		for i, p := range run.Passes {
			for _, pr := range p.Procs {
				warnings += pr.Warnings
				errs += pr.Errors
				if len(pr.Problems) > 0 || pr.Dump != "" {
					t := fmt.Sprintf("%s, pass %d, process %s: exit %d, %s", run.Name(), i+1, pr.label(), pr.Exit,
						strings.Join(pr.Problems, "; "))
					if pr.Dump != "" {
						t += " (log kept in " + pr.Dump + ")"
					}
					troubled = append(troubled, t)
				}
			}
		}
	}
	const shown = 5
	list := strings.Join(troubled[:min(shown, len(troubled))], ". ")
	if len(troubled) > shown {
		list += fmt.Sprintf(". And %d more", len(troubled)-shown)
	}
	unclean, why := 0, ""
	for _, run := range f.Runs {
		for i, p := range run.Passes {
			if w := p.problem(f.Site.URLs()); w != "" {
				if unclean == 0 {
					why = fmt.Sprintf("%s, pass %d: %s", run.Name(), i+1, w)
				}
				unclean++
			}
		}
	}
	return []Figure{
		num("warnings in the processes' logs", Count, warnings, "all passes"),
		num("errors in the processes' logs", Count, errs, "all passes"),
		num("processes that logged warnings or errors", Count, len(troubled), "the first few named").listing(list),
		num("passes not clean", Count, unclean, "a pass is clean when each page was fetched once, every process "+
			"exited 0 and none hit the cap; the first unclean one named").listing(why).check(Equal, 0),
	}
}
