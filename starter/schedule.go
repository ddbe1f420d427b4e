package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/api/intent"
	"karvi-edda-temporal/intent"
)

// `schedule ...` operates schedule intents: a dispatch or a run file fired
// once (-run-at) or on a cron, each intent one Temporal Schedule
// (docs/schedules.md).

// scheduleOptions are the schedule commands' flags. set names those given
// on the command line, so that update changes only them.
type scheduleOptions struct {
	name, runAt, cron, tz, owner, until, overflow, target string
	maxRuns, catchUp, maxErrors                           int
	minInterval                                           time.Duration
	set                                                   map[string]bool
}

func (s *scheduleOptions) mark(name string) {
	if s.set == nil {
		s.set = map[string]bool{}
	}
	s.set[name] = true
}

// createFlags: -name and the intent's spec.
func (s *scheduleOptions) createFlags(fs *flag.FlagSet) {
	s.stringFlag(fs, "name", &s.name, "the intent's `name` (a-z 0-9 _ -): its schedule is karvi-intent-<name> (required)")
	s.specFlags(fs)
	s.stringFlag(fs, "owner", &s.owner, "`owner` the quota counts the intent against (default $USER)")
}

// updateFlags: the spec, and a new target.
func (s *scheduleOptions) updateFlags(fs *flag.FlagSet) {
	s.specFlags(fs)
	s.stringFlag(fs, "target", &s.target, "a new target: a DispatchPlan or run `file` (- for stdin)")
}

func (s *scheduleOptions) specFlags(fs *flag.FlagSet) {
	s.stringFlag(fs, "run-at", &s.runAt, "fire once at `time`: RFC 3339, \"2026-03-01 09:00\" in -tz, or a delay \"+10m\"; never sooner than -min-interval")
	s.stringFlag(fs, "cron", &s.cron, "fire on the cron `expr`ession (5 fields, 6 with a year, 7 with seconds first; @hourly, @every 90s, ...)")
	s.stringFlag(fs, "tz", &s.tz, "time `zone` of -cron and of a wall-clock -run-at (default the host's, stored by name)")
	s.intFlag(fs, "max-runs", &s.maxRuns, "stop after `n` runs (default 1 for -run-at, 10000 for -cron)")
	s.stringFlag(fs, "until", &s.until, "stop once the `condition` holds after a run: task_completed, runs>=N, all_of(...), any_of(...); none")
	s.intFlag(fs, "catch-up", &s.catchUp, "after downtime, run at most `n` missed fires (default 1)")
	s.stringFlag(fs, "overflow", &s.overflow, "`policy` for missed fires over -catch-up: skip them (default), or defer them to one more fire")
	s.intFlag(fs, "max-errors", &s.maxErrors, "open the circuit (pause in error) after `n` failed fires in a row (default 3)")
	fs.Func("min-interval", "shortest `duration` between fires, and the first backoff (default 1m)", func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("want a duration like 30s or 2m")
		}
		s.minInterval = d
		s.mark("min-interval")
		return nil
	})
}

func (s *scheduleOptions) stringFlag(fs *flag.FlagSet, name string, p *string, usage string) {
	fs.Func(name, usage, func(v string) error {
		*p = v
		s.mark(name)
		return nil
	})
}

func (s *scheduleOptions) intFlag(fs *flag.FlagSet, name string, p *int, usage string) {
	fs.Func(name, usage, func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("want a whole number")
		}
		*p = n
		s.mark(name)
		return nil
	})
}

type scheduleListOpts struct{ json bool }

func (o *scheduleListOpts) flags(fs *flag.FlagSet) {
	fs.BoolVar(&o.json, "json", false, "print each intent's view as JSON: its spec, state and latest fires")
}

// intents is the intents' client, on the connection every command dials.
func (e *env) intents() (*intentapi.Intents, error) {
	cl, err := e.client()
	if err != nil {
		return nil, err
	}
	return &intentapi.Intents{Client: cl, Converter: e.conn.Options.DataConverter, TaskQueue: e.queue, Quota: intent.DefaultQuota}, nil
}

// The schedule commands' handlers check what needs no server (the target,
// the spec) before they dial.

func scheduleCreateCmd(e *env, s *scheduleOptions) error {
	spec, err := buildIntent(*s, e.inv.arg, e.stdin)
	if err != nil {
		return err
	}
	x, err := e.intents()
	if err != nil {
		return err
	}
	if err := x.Create(e.ctx, spec); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "created intent %s (schedule %s)\n", spec.Name, intentapi.ScheduleID(spec.Name))
	printSpec(e.stdout, spec, time.Now())
	return nil
}

func scheduleListCmd(e *env, _ client.Client, o *scheduleListOpts) error {
	x, err := e.intents()
	if err != nil {
		return err
	}
	return listIntents(e.ctx, x, e.stdout, o.json)
}

func scheduleUpdateCmd(e *env, s *scheduleOptions) error {
	if len(s.set) == 0 {
		return &usageError{msg: "schedule update: nothing to change; give the flags to change", cmd: e.inv.cmd.name}
	}
	var target *intent.Target
	if s.set["target"] {
		t, err := readTarget(s.target, e.stdin)
		if err != nil {
			return err
		}
		target = &t
	}
	x, err := e.intents()
	if err != nil {
		return err
	}
	return updateIntent(e.ctx, x, e.inv.arg, *s, target, e.stdout)
}

func scheduleTriggerCmd(e *env, _ client.Client, _ *noFlags) error {
	x, err := e.intents()
	if err != nil {
		return err
	}
	name := e.inv.arg
	if err := x.Trigger(e.ctx, name); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "triggered intent %s\n", name)
	return nil
}

func schedulePauseCmd(e *env, _ client.Client, o *reasonOpts) error {
	x, err := e.intents()
	if err != nil {
		return err
	}
	name := e.inv.arg
	if err := x.Pause(e.ctx, name, "paused by "+whoAmI()+suffix(o.reason)); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "paused intent %s\n", name)
	return nil
}

func scheduleUnpauseCmd(e *env, _ client.Client, o *reasonOpts) error {
	x, err := e.intents()
	if err != nil {
		return err
	}
	name := e.inv.arg
	if err := x.Unpause(e.ctx, name, "unpaused by "+whoAmI()+suffix(o.reason)); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "unpaused intent %s\n", name)
	return nil
}

func scheduleCancelCmd(e *env, _ client.Client, o *reasonOpts) error {
	x, err := e.intents()
	if err != nil {
		return err
	}
	name := e.inv.arg
	if err := x.Cancel(e.ctx, name, orDefault(o.reason, "by "+whoAmI())); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "cancelled intent %s: schedule %s deleted (a target it started runs on)\n", name, intentapi.ScheduleID(name))
	return nil
}

// buildIntent reads the target and builds the intent's spec from the
// flags, checking everything that needs no server.
func buildIntent(s scheduleOptions, file string, stdin io.Reader) (intent.Spec, error) {
	target, err := readTarget(file, stdin)
	if err != nil {
		return intent.Spec{}, err
	}
	spec, err := intent.Build(intent.Request{
		Name: s.name, Target: target, RunAt: s.runAt, Cron: s.cron, TimeZone: s.tz, MaxRuns: s.maxRuns,
		Owner: s.owner, Until: s.until, CatchUp: s.catchUp, Overflow: s.overflow, MaxErrors: s.maxErrors,
		MinInterval: s.minInterval, HostZone: hostZone(), DefaultOwner: whoAmI(),
	}, time.Now())
	if err != nil {
		return intent.Spec{}, fmt.Errorf("intent not created:\n%w", indent(err))
	}
	return spec, nil
}

func updateIntent(ctx context.Context, x *intentapi.Intents, name string, s scheduleOptions, target *intent.Target, stdout io.Writer) error {
	spec, err := x.Update(ctx, name, func(r *intent.Request) {
		// A new time replaces the other kind of time.
		if s.set["run-at"] {
			r.RunAt, r.Cron = s.runAt, ""
			if !s.set["max-runs"] {
				r.MaxRuns = 0 // the one-shot's default
			}
		}
		if s.set["cron"] {
			r.Cron, r.RunAt = s.cron, ""
			if !s.set["max-runs"] && r.MaxRuns == intent.DefaultMaxRunsOnce {
				r.MaxRuns = 0 // the recurring default
			}
		}
		set := func(flag string, apply func()) {
			if s.set[flag] {
				apply()
			}
		}
		set("tz", func() { r.TimeZone = s.tz })
		set("max-runs", func() { r.MaxRuns = s.maxRuns })
		set("until", func() { r.Until = s.until })
		set("catch-up", func() { r.CatchUp = s.catchUp })
		set("overflow", func() { r.Overflow = s.overflow })
		set("max-errors", func() { r.MaxErrors = s.maxErrors })
		set("min-interval", func() { r.MinInterval = s.minInterval })
		if target != nil {
			r.Target = *target
		}
	})
	if err != nil {
		return fmt.Errorf("intent %s not updated:\n%w", name, indent(err))
	}
	fmt.Fprintf(stdout, "updated intent %s\n", name)
	printSpec(stdout, spec, time.Now())
	return nil
}

// readTarget reads a DispatchPlan or a run file, as start and run start
// would.
func readTarget(file string, stdin io.Reader) (intent.Target, error) {
	data, err := readInput(file, stdin)
	if err != nil {
		return intent.Target{}, fmt.Errorf("read target: %w", err)
	}
	t, err := intent.ParseTarget(data)
	if err != nil {
		return intent.Target{}, fmt.Errorf("target %s: %w", file, err)
	}
	return t, nil
}

func printSpec(w io.Writer, s intent.Spec, now time.Time) {
	fmt.Fprintf(w, "  fires    %s", s.Target)
	if s.Target.Title != "" {
		fmt.Fprintf(w, " (%s)", s.Target.Title)
	}
	fmt.Fprintf(w, ", %s", s.When())
	if s.RunAt.IsZero() {
		fmt.Fprintf(w, " in %s", s.TimeZone)
	}
	fmt.Fprintln(w)
	if times, err := s.Times(); err == nil {
		var next []string
		for at := times.Next(now); !at.IsZero() && len(next) < 3; at = times.Next(at) {
			next = append(next, at.In(times.Location()).Format("2006-01-02 15:04:05 MST"))
		}
		fmt.Fprintf(w, "  next     %s\n", orDash(strings.Join(next, ", ")))
	}
	stops := "after " + plural(s.MaxRuns, "run")
	if s.Until != nil {
		stops = "once " + s.Until.String() + " holds after a run, or " + stops
	}
	fmt.Fprintf(w, "  stops    %s; in error after %s in a row (backoff from %s, at most %s)\n",
		stops, plural(s.MaxErrors, "failed fire"), s.MinInterval.D(), intent.MaxBackoff)
	fmt.Fprintf(w, "  catch-up at most %s after downtime, the rest: %s (catch-up window %s)\n",
		plural(s.CatchUp, "missed fire"), s.Overflow, s.CatchUpWindow(now))
	fmt.Fprintf(w, "  owner    %s\n", s.Owner)
}

func listIntents(ctx context.Context, x *intentapi.Intents, stdout io.Writer, asJSON bool) error {
	views, err := x.List(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		if views == nil {
			views = []intentapi.View{}
		}
		return printJSON(stdout, views)
	}
	if len(views) == 0 {
		_, err := fmt.Fprintln(stdout, "no intents")
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTARGET\tWHEN\tZONE\tNEXT\tRUNS\tLAST OUTCOME\tSTATE")
	for _, v := range views {
		zone, next := v.Spec.TimeZone, "-"
		loc, err := time.LoadLocation(zone)
		if err != nil {
			loc = time.UTC
		}
		if v.Status == intent.StatusActive && len(v.Next) > 0 {
			var ts []string
			for _, at := range v.Next[:min(2, len(v.Next))] {
				ts = append(ts, at.In(loc).Format("Jan 2 15:04:05"))
			}
			next = strings.Join(ts, ", ")
		}
		last := "-"
		if o := v.State.LastOutcome; o != nil {
			last = clip(o.String(), 48)
		}
		when := v.Spec.When()
		if v.Spec.Cron != "" {
			when = v.Spec.Cron
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", v.Name, v.Spec.Target, when, zone, next,
			v.State.Runs, v.Spec.MaxRuns, last, v.Status)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, v := range views {
		switch {
		case v.Status != intent.StatusActive:
			fmt.Fprintf(stdout, "%s: %s\n", v.Name, v.Note)
		case v.State.Doing != "":
			fmt.Fprintf(stdout, "%s: firing: %s\n", v.Name, v.State.Doing)
		case v.State.ConsecutiveErrors > 0:
			fmt.Fprintf(stdout, "%s: %d failed fires in a row (circuit at %d)\n", v.Name, v.State.ConsecutiveErrors, v.Spec.MaxErrors)
		}
	}
	return nil
}

// hostZone is this machine's time zone by name, so that an intent made
// here fires at the same wall-clock time wherever its worker runs.
func hostZone() string {
	if tz := strings.TrimPrefix(os.Getenv("TZ"), ":"); tz != "" && intent.ValidZone(tz) {
		return tz
	}
	if link, err := os.Readlink("/etc/localtime"); err == nil {
		if _, name, ok := strings.Cut(link, "zoneinfo/"); ok && intent.ValidZone(name) {
			return name
		}
	}
	if data, err := os.ReadFile("/etc/timezone"); err == nil {
		if name := strings.TrimSpace(string(data)); intent.ValidZone(name) {
			return name
		}
	}
	return "UTC"
}

// whoAmI names the person at the terminal: the default owner of an intent
// and the author of a pause.
func whoAmI() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return intent.DefaultOwner
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func suffix(reason string) string {
	if reason == "" {
		return ""
	}
	return ": " + reason
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// indent puts each of a joined error's lines under the headline.
func indent(err error) error {
	return fmt.Errorf("  %s", strings.ReplaceAll(err.Error(), "\n", "\n  "))
}
