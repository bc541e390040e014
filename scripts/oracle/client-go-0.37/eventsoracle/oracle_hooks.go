// oracle_hooks.go is NOT part of client-go (it is ../shared/oracle/modern/eventsoracle's file,
// unchanged but for this paragraph). build.sh copies the non-test files of
// k8s.io/client-go/tools/events (v0.37.2, from the Go module cache) to the private import path
// k8s.io/client-go/tools/eventsoracle of a copy of the client-go module, rewrites
// their three time.Now() calls to oracleNow()
// (eventf's EventTime; finishSeries' two cut-offs), and adds this file, which lets a harness drive
// the package's unexported pieces one step at a time with a fake clock:
//
//   - the recorder (recorderImpl.Eventf: reference, type check, note formatting, makeEvent, Action
//     on the broadcaster), with the clock and reportingInstance given instead of
//     clock.RealClock{} and <controller>-<os.Hostname()>;
//   - the broadcaster's delivery to the sink watcher (a watcher on the same watch.Broadcaster, as
//     StartEventWatcher creates), read here instead of in a goroutine;
//   - recordToSink(ctx, event, clock) with the fake clock instead of clock.RealClock{}, as
//     startRecordingEvents' handler calls it, and a wait for its goroutine's cache update;
//   - refreshExistingEventSeries / finishSeries, called on demand instead of by wait.UntilWithContext.
package events

import (
	"context"
	"fmt"
	"sort"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
)

// oracleNow stands in for time.Now in the rewritten files. Real time unless NewOracle sets it.
var oracleNow = time.Now

// Oracle holds one broadcaster (as NewBroadcaster(sink) builds it) and the sink watcher's channel.
type Oracle struct {
	b      *eventBroadcasterImpl
	clock  clock.Clock
	ctx    context.Context
	cancel context.CancelFunc
	w      watch.Interface
	down   bool
}

// NewOracle builds the broadcaster with NewBroadcaster's settings (sleep 10 s between retries, empty
// series cache) and registers the sink watcher. clk becomes the package's time source.
func NewOracle(sink EventSink, clk clock.Clock) (*Oracle, error) {
	oracleNow = clk.Now
	b := newBroadcaster(sink, defaultSleepDuration, map[eventKey]*eventsv1.Event{}).(*eventBroadcasterImpl)
	w, err := b.Watch()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Oracle{b: b, clock: clk, ctx: ctx, cancel: cancel, w: w}, nil
}

// NewRecorder is eventBroadcasterImpl.NewRecorder with the reporting instance given (NewRecorder
// computes <controller>-<os.Hostname()>) and the oracle's clock (NewRecorder: clock.RealClock{}).
func (o *Oracle) NewRecorder(scheme *runtime.Scheme, controller, instance string) EventRecorder {
	return &recorderImpl{scheme, controller, instance, o.b.Broadcaster, o.clock}
}

// Next returns the next event the broadcaster delivers to the sink watcher (what
// startRecordingEvents' handler receives). timeout is real time.
func (o *Oracle) Next(timeout time.Duration) (*eventsv1.Event, error) {
	select {
	case we, ok := <-o.w.ResultChan():
		if !ok {
			return nil, fmt.Errorf("sink watcher closed")
		}
		ev, ok := we.Object.(*eventsv1.Event)
		if !ok {
			return nil, fmt.Errorf("unexpected object %T", we.Object)
		}
		return ev, nil
	case <-time.After(timeout):
		return nil, fmt.Errorf("no event delivered within %v", timeout)
	}
}

// CacheState of ev's isomorphic key: 0 not cached, 1 cached without series, n >= 2 series count n.
func (o *Oracle) CacheState(ev *eventsv1.Event) int32 {
	o.b.mu.Lock()
	defer o.b.mu.Unlock()
	return cacheStateLocked(o.b.eventCache, getKey(ev))
}

func cacheStateLocked(cache map[eventKey]*eventsv1.Event, k eventKey) int32 {
	cached, ok := cache[k]
	switch {
	case !ok:
		return 0
	case cached.Series == nil:
		return 1
	default:
		return cached.Series.Count
	}
}

// Record calls recordToSink(ctx, ev, clock), as startRecordingEvents' handler does with
// clock.RealClock{}. recordToSink updates the series cache and writes in a goroutine of its own;
// Record returns once that goroutine has updated the cache, with the cache state before and after:
// 0->1 means the goroutine goes on to Create, 1->2 to Patch (and Create on 404), n->n+1 (n >= 2)
// means no write. The caller waits for the write through its sink.
func (o *Oracle) Record(ev *eventsv1.Event, timeout time.Duration) (before, after int32, err error) {
	k := getKey(ev)
	o.b.mu.Lock()
	before = cacheStateLocked(o.b.eventCache, k)
	o.b.mu.Unlock()
	o.b.recordToSink(o.ctx, ev, o.clock)
	deadline := time.Now().Add(timeout)
	for {
		o.b.mu.Lock()
		after = cacheStateLocked(o.b.eventCache, k)
		o.b.mu.Unlock()
		if after != before {
			return before, after, nil
		}
		if time.Now().After(deadline) {
			return before, after, fmt.Errorf("recordToSink did not update the cache within %v", timeout)
		}
		time.Sleep(2 * time.Microsecond)
	}
}

// Refresh runs one pass of the refresh loop (StartRecordingToSinkWithContext runs it every 30 min).
func (o *Oracle) Refresh() bool {
	if o.down {
		return false
	}
	o.b.refreshExistingEventSeries(o.ctx)
	return true
}

// Finish runs one pass of the finish loop (StartRecordingToSinkWithContext runs it every 6 min).
func (o *Oracle) Finish() bool {
	if o.down {
		return false
	}
	o.b.finishSeries(o.ctx)
	return true
}

// Shutdown is EventBroadcaster.Shutdown plus the cancellation of StartRecordingToSink's context
// (which stops the refresh and finish loops).
func (o *Oracle) Shutdown() {
	if o.down {
		return
	}
	o.b.Shutdown()
	o.cancel()
	o.down = true
}

// Down reports whether Shutdown was called.
func (o *Oracle) Down() bool { return o.down }

// CacheLen is the number of entries in the series cache.
func (o *Oracle) CacheLen() int {
	o.b.mu.Lock()
	defer o.b.mu.Unlock()
	return len(o.b.eventCache)
}

// SharedNames lists "namespace/name" values held by more than one series-cache entry. refresh
// and finish walk the cache in Go's random map order, so such entries write in a random order.
func (o *Oracle) SharedNames() []string {
	o.b.mu.Lock()
	defer o.b.mu.Unlock()
	seen := map[string]int{}
	for _, ev := range o.b.eventCache {
		seen[ev.Namespace+"/"+ev.Name]++
	}
	var out []string
	for n, c := range seen {
		if c > 1 {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
