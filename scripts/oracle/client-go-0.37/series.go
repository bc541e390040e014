// -mode series: replay a JSONL trace through client-go v0.37.2's tools/events (events.k8s.io/v1)
// with a fake clock and an in-memory events.k8s.io/v1 apiserver; print one JSONL line per sink call.
// The package is driven through a private copy, k8s.io/client-go/tools/eventsoracle, that
// build.sh adds to a copy of the client-go module (see
// eventsoracle/oracle_hooks.go and README.md).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/scheme"
	eventsoracle "k8s.io/client-go/tools/eventsoracle"
	"k8s.io/client-go/tools/record/util"
	testingclock "k8s.io/utils/clock/testing"
)

// seriesLine is one input line: an event occurrence, or a control line.
type seriesLine struct {
	Time                *int64       `json:"time"` // unix nanoseconds; required on occurrences
	Regarding           *traceObject `json:"regarding"`
	Related             *traceObject `json:"related"`
	Type                string       `json:"type"`
	Reason              string       `json:"reason"`
	Action              string       `json:"action"`
	Note                string       `json:"note"`
	ReportingController string       `json:"reportingController"`
	ReportingInstance   *string      `json:"reportingInstance"` // absent: <controller>-<-hostname>
	Tick                string       `json:"tick"`              // "refresh" | "finish"
	Delete              *struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"delete"`
	Shutdown bool `json:"shutdown"`
}

// sinkCall is one output line.
type sinkCall struct {
	I         int                   `json:"i"`
	Verb      string                `json:"verb"` // create | patch | update | none (-all only)
	Namespace string                `json:"namespace,omitempty"`
	Name      string                `json:"name,omitempty"`
	Body      json.RawMessage       `json:"body,omitempty"`
	Series    *eventsv1.EventSeries `json:"series"`
	Result    string                `json:"result,omitempty"` // ok | notfound | conflict
	Tick      string                `json:"tick,omitempty"`   // refresh | finish: written by that loop
	Why       string                `json:"why,omitempty"`    // verb none only
}

// seriesSink is an in-memory events.k8s.io/v1 registry implementing tools/events' EventSink; it
// records every call.
type seriesSink struct {
	mu       sync.Mutex
	store    map[string]*eventsv1.Event
	rv       int
	i        int    // input line being processed
	tick     string // loop being run, if any
	calls    []sinkCall
	terminal chan struct{} // one token per call after which recordEvent writes no more
}

var eventsGR = schema.GroupResource{Group: "events.k8s.io", Resource: "events"}

func (s *seriesSink) record(verb string, e *eventsv1.Event, body []byte, result string) {
	var series *eventsv1.EventSeries
	if e.Series != nil {
		series = e.Series.DeepCopy()
	}
	s.calls = append(s.calls, sinkCall{I: s.i, Verb: verb, Namespace: e.Namespace, Name: e.Name,
		Body: json.RawMessage(body), Series: series, Result: result, Tick: s.tick})
	// recordEvent follows a 404 on Patch with a Create, and retries (after sleeping) a series
	// Create refused with AlreadyExists; every other answer ends the write.
	if !(verb == "patch" && result == "notfound") && !(verb == "create" && result == "conflict" && e.Series != nil) {
		select {
		case s.terminal <- struct{}{}:
		default:
		}
	}
}

func (s *seriesSink) create(e *eventsv1.Event) (*eventsv1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	body, _ := json.Marshal(e)
	k := key(e.Namespace, e.Name)
	if _, ok := s.store[k]; ok {
		s.record("create", e, body, "conflict")
		return nil, apierrors.NewAlreadyExists(eventsGR, e.Name)
	}
	c := e.DeepCopy()
	s.rv++
	c.ResourceVersion = fmt.Sprint(s.rv)
	s.store[k] = c
	s.record("create", e, body, "ok")
	return c.DeepCopy(), nil
}

func (s *seriesSink) update(e *eventsv1.Event) (*eventsv1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	body, _ := json.Marshal(e)
	k := key(e.Namespace, e.Name)
	if _, ok := s.store[k]; !ok {
		s.record("update", e, body, "notfound")
		return nil, apierrors.NewNotFound(eventsGR, e.Name)
	}
	c := e.DeepCopy()
	s.rv++
	c.ResourceVersion = fmt.Sprint(s.rv)
	s.store[k] = c
	s.record("update", e, body, "ok")
	return c.DeepCopy(), nil
}

func (s *seriesSink) patch(e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key(e.Namespace, e.Name)
	cur, ok := s.store[k]
	if !ok {
		s.record("patch", e, data, "notfound")
		return nil, apierrors.NewNotFound(eventsGR, e.Name)
	}
	old, _ := json.Marshal(cur)
	merged, err := strategicpatch.StrategicMergePatch(old, data, &eventsv1.Event{})
	if err != nil {
		s.record("patch", e, data, "error")
		return nil, apierrors.NewBadRequest(err.Error())
	}
	out := &eventsv1.Event{}
	if err := json.Unmarshal(merged, out); err != nil {
		s.record("patch", e, data, "error")
		return nil, apierrors.NewBadRequest(err.Error())
	}
	s.rv++
	out.ResourceVersion = fmt.Sprint(s.rv)
	s.store[k] = out
	s.record("patch", e, data, "ok")
	return out.DeepCopy(), nil
}

// take returns and clears the recorded calls.
func (s *seriesSink) take() []sinkCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls
	s.calls = nil
	return c
}

func (s *seriesSink) drainTerminal() {
	for {
		select {
		case <-s.terminal:
		default:
			return
		}
	}
}

// seriesOut is flushed by fail, so the lines before a failure are kept.
var seriesOut *bufio.Writer

func fail(format string, args ...interface{}) {
	if seriesOut != nil {
		seriesOut.Flush()
	}
	fmt.Fprintf(os.Stderr, "series: "+format+"\n", args...)
	os.Exit(2)
}

func series(ticks, hostname string, all bool) {
	if ticks != "manual" && ticks != "auto" {
		fail("-ticks must be manual or auto")
	}
	fc := testingclock.NewFakeClock(time.Unix(0, 0))
	sink := &seriesSink{store: map[string]*eventsv1.Event{}, terminal: make(chan struct{}, 64)}
	o, err := eventsoracle.NewOracle(sinkAdapter{sink}, fc)
	if err != nil {
		fail("%v", err)
	}
	const wait = 60 * time.Second // real time; a write that is retried sleeps 10-12.5 s first

	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	out := bufio.NewWriter(os.Stdout)
	seriesOut = out
	defer out.Flush()
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	emit := func(calls []sinkCall, sortByName bool) {
		if sortByName {
			// refresh and finish walk the cache in Go's random map order; each entry's calls
			// (patch, then create after a 404) stay together and in order.
			sort.SliceStable(calls, func(a, b int) bool {
				return key(calls[a].Namespace, calls[a].Name) < key(calls[b].Namespace, calls[b].Name)
			})
		}
		for _, c := range calls {
			enc.Encode(c)
		}
	}
	none := func(i int, why string) {
		if all {
			enc.Encode(sinkCall{I: i, Verb: "none", Why: why})
		}
	}
	runTick := func(i int, which string) {
		if names := o.SharedNames(); len(names) > 0 {
			fmt.Fprintf(os.Stderr, "series: line %d: %s over cache entries sharing a name %v: their write order is random\n", i, which, names)
		}
		sink.mu.Lock()
		sink.i, sink.tick = i, which
		sink.mu.Unlock()
		var ran bool
		cached := o.CacheLen()
		if which == "refresh" {
			ran = o.Refresh()
		} else {
			ran = o.Finish()
		}
		dropped := cached - o.CacheLen()
		sink.mu.Lock()
		sink.tick = ""
		sink.mu.Unlock()
		calls := sink.take()
		if !ran {
			none(i, which+": after shutdown")
		} else if len(calls) == 0 {
			none(i, fmt.Sprintf("%s: nothing to write, %d entries dropped from the cache", which, dropped))
		}
		for k := range calls {
			calls[k].Tick = which
		}
		emit(calls, true)
	}

	// -ticks auto: wait.UntilWithContext runs each loop when recording starts (here: the first
	// line's time), then `period` after the previous run returned (here: runs take no fake time).
	var started bool
	var nextRefresh, nextFinish time.Time
	advance := func(i int, t time.Time) {
		if ticks != "auto" {
			fc.SetTime(t)
			return
		}
		if !started {
			started, nextRefresh, nextFinish = true, t, t
		}
		for !o.Down() {
			// equal due times: finish first (the real loops race; this order writes less)
			if !nextFinish.After(t) && !nextFinish.After(nextRefresh) {
				fc.SetTime(nextFinish)
				runTick(i, "finish")
				nextFinish = nextFinish.Add(6 * time.Minute)
			} else if !nextRefresh.After(t) {
				fc.SetTime(nextRefresh)
				runTick(i, "refresh")
				nextRefresh = nextRefresh.Add(30 * time.Minute)
			} else {
				break
			}
		}
		fc.SetTime(t)
	}

	recorders := map[[2]string]eventsoracle.EventRecorder{}
	i := -1
	for in.Scan() {
		i++
		var l seriesLine
		if err := json.Unmarshal(in.Bytes(), &l); err != nil {
			fail("line %d: %v", i, err)
		}
		sink.mu.Lock()
		sink.i = i
		sink.mu.Unlock()
		if l.Time != nil {
			t := time.Unix(0, *l.Time)
			if t.Before(fc.Now()) && started {
				fail("line %d: time goes backwards", i)
			}
			advance(i, t)
			started = true
		}
		switch {
		case l.Delete != nil:
			sink.mu.Lock()
			delete(sink.store, key(l.Delete.Namespace, l.Delete.Name))
			sink.mu.Unlock()
			none(i, "deleted")
		case l.Shutdown:
			o.Shutdown()
			none(i, "shutdown")
		case l.Tick != "":
			if l.Tick != "refresh" && l.Tick != "finish" {
				fail("line %d: tick must be refresh or finish", i)
			}
			runTick(i, l.Tick)
		case l.Regarding != nil:
			if l.Time == nil {
				fail("line %d: an occurrence needs a time", i)
			}
			instance := l.ReportingController + "-" + hostname
			if l.ReportingInstance != nil {
				instance = *l.ReportingInstance
			}
			rk := [2]string{l.ReportingController, instance}
			rec, ok := recorders[rk]
			if !ok {
				rec = o.NewRecorder(scheme.Scheme, l.ReportingController, instance)
				recorders[rk] = rec
			}
			var related runtime.Object
			if l.Related != nil {
				related = l.Related.ref()
			}
			var regarding runtime.Object = l.Regarding.ref()
			sink.drainTerminal() // tokens of the loops' writes (auto ticks above)
			// the note is Eventf's format string, with no arguments
			rec.Eventf(regarding, related, l.Type, l.Reason, l.Action, l.Note)
			if !util.ValidateEventType(l.Type) {
				none(i, "invalid type: the recorder dropped it")
				continue
			}
			if o.Down() {
				none(i, "after shutdown: the broadcaster refused it")
				continue
			}
			ev, err := o.Next(wait)
			if err != nil {
				fail("line %d: %v", i, err)
			}
			before, after, err := o.Record(ev, wait)
			if err != nil {
				fail("line %d: %v", i, err)
			}
			if before == 0 || before == 1 {
				select {
				case <-sink.terminal:
				case <-time.After(wait):
					fail("line %d: recordToSink wrote nothing within %v", i, wait)
				}
				emit(sink.take(), false)
			} else {
				none(i, fmt.Sprintf("series count %d -> %d in the cache, not written", before, after))
			}
		default:
			if l.Type != "" || l.Reason != "" || l.Action != "" || l.Note != "" || l.ReportingController != "" {
				fail("line %d: an occurrence needs \"regarding\"", i)
			}
			if l.Time == nil {
				fail("line %d: nothing to do", i)
			}
			none(i, "clock advanced")
		}
	}
	if err := in.Err(); err != nil {
		fail("reading input: %v", err)
	}
}

// sinkAdapter gives seriesSink the context-taking method set of tools/events' EventSink.
type sinkAdapter struct{ s *seriesSink }

var _ eventsoracle.EventSink = sinkAdapter{}

func (a sinkAdapter) Create(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return a.s.create(e)
}
func (a sinkAdapter) Update(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return a.s.update(e)
}
func (a sinkAdapter) Patch(_ context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	return a.s.patch(e, data)
}
