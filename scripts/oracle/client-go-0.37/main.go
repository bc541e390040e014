// evoracle-0.37: ../shared/oracle/modern's evoracle-modern (client-go v0.36.4) built from Go
// modules against client-go v0.37.2 (Kubernetes 1.37); see README.md and build.sh here. The code
// is that harness's, with only the version strings and the import path of the private
// tools/events copy changed: client-go's tools/record and tools/events behave the same for
// everything it drives (docs/compatibility.md, "client-go v0.37.2"). Modes:
//
//	correlate  - replay a JSONL trace through record.EventCorrelator with a fake clock and an
//	             in-memory apiserver; print one JSONL decision per input line. Same input and
//	             output format as the v1.20.2 harness (../main.go).
//	bench      - time EventCorrelate alone, and the whole broadcaster pipeline into a counting
//	             sink, on a generated workload; print JSON figures (same keys as ../main.go).
//	apiserver  - record a generated workload through the whole client-go pipeline to a real
//	             apiserver (kubeconfig), wait for the sink to drain, print figures.
//	series     - replay a JSONL trace of events.k8s.io/v1 events through tools/events
//	             (recorder, series cache, refresh and finish loops) with a fake clock; print one
//	             JSONL line per sink call (see series.go and README.md).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedv1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/tools/record/util"
	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"
)

const impl = "client-go v0.37.2"

type traceObject struct {
	APIVersion      string `json:"apiVersion"`
	Kind            string `json:"kind"`
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	UID             string `json:"uid"`
	ResourceVersion string `json:"resourceVersion"`
	FieldPath       string `json:"fieldPath"`
}

func (o *traceObject) ref() *v1.ObjectReference {
	return &v1.ObjectReference{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, UID: types.UID(o.UID),
		APIVersion: o.APIVersion, ResourceVersion: o.ResourceVersion, FieldPath: o.FieldPath}
}

type traceLine struct {
	Time   int64 `json:"time"` // unix nanoseconds
	Source struct {
		Component string `json:"component"`
		Host      string `json:"host"`
	} `json:"source"`
	Object  *traceObject `json:"object"`
	Type    string       `json:"type"`
	Reason  string       `json:"reason"`
	Message string       `json:"message"`
	// Delete, when set, removes a stored event (as the apiserver's TTL would).
	Delete *struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"delete"`
}

type decision struct {
	I              int             `json:"i"`
	Action         string          `json:"action"` // create | patch | recreate | skip | invalid | deleted (+ -conflict)
	Namespace      string          `json:"namespace,omitempty"`
	Name           string          `json:"name,omitempty"`
	Count          int32           `json:"count,omitempty"`
	Type           string          `json:"type,omitempty"`
	Reason         string          `json:"reason,omitempty"`
	Message        string          `json:"message,omitempty"`
	FirstTimestamp string          `json:"firstTimestamp,omitempty"`
	LastTimestamp  string          `json:"lastTimestamp,omitempty"`
	Patch          json.RawMessage `json:"patch,omitempty"`
	// Only with -reporting-fields (not part of the v1.20 harness's format).
	ReportingController string `json:"reportingController,omitempty"`
	ReportingInstance   string `json:"reportingInstance,omitempty"`
}

// memSink is an in-memory stand-in for the apiserver's events registry (core/v1).
type memSink struct {
	store map[string]*v1.Event
	rv    int
}

func key(ns, name string) string { return ns + "/" + name }

func (s *memSink) Create(e *v1.Event) (*v1.Event, error) {
	k := key(e.Namespace, e.Name)
	if _, ok := s.store[k]; ok {
		return nil, apierrors.NewAlreadyExists(schema.GroupResource{Resource: "events"}, e.Name)
	}
	c := e.DeepCopy()
	s.rv++
	c.ResourceVersion = fmt.Sprint(s.rv)
	s.store[k] = c
	return c.DeepCopy(), nil
}

func (s *memSink) Update(e *v1.Event) (*v1.Event, error) { return nil, fmt.Errorf("update not used") }

func (s *memSink) Patch(e *v1.Event, patch []byte) (*v1.Event, error) {
	k := key(e.Namespace, e.Name)
	cur, ok := s.store[k]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "events"}, e.Name)
	}
	old, _ := json.Marshal(cur)
	merged, err := strategicpatch.StrategicMergePatch(old, patch, &v1.Event{})
	if err != nil {
		return nil, err
	}
	out := &v1.Event{}
	if err := json.Unmarshal(merged, out); err != nil {
		return nil, err
	}
	s.rv++
	out.ResourceVersion = fmt.Sprint(s.rv)
	s.store[k] = out
	return out.DeepCopy(), nil
}

func ts(t metav1.Time) string {
	b, _ := json.Marshal(t)
	var s string
	json.Unmarshal(b, &s)
	return s
}

// legacyNames: build names as v1.20 did (fmt "%v.%x", even when that is not a valid name).
var legacyNames bool

// makeEvent mirrors the v0.37.2 recorder's (unchanged since v0.36.4) event construction: tools/record event.go makeEvent
// (name from util.GenerateEventName: "<object>.<unix-nanos hex>", or a UUID v4 when that is not
// a valid DNS-1123 subdomain) plus the fields generateEvent sets (Source, and since 1.28
// ReportingController/ReportingInstance = Source.Component/Source.Host).
func makeEvent(l *traceLine, now time.Time) *v1.Event {
	ref := l.Object.ref()
	t := metav1.Time{Time: now}
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	name := util.GenerateEventName(ref.Name, t.UnixNano())
	if legacyNames {
		name = fmt.Sprintf("%v.%x", ref.Name, t.UnixNano())
	}
	return &v1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: ns},
		InvolvedObject: *ref, Reason: l.Reason, Message: l.Message,
		FirstTimestamp: t, LastTimestamp: t, Count: 1, Type: l.Type,
		Source:              v1.EventSource{Component: l.Source.Component, Host: l.Source.Host},
		ReportingController: l.Source.Component, ReportingInstance: l.Source.Host,
	}
}

// legacySpamKey is v1.20's spam-filter key (client-go 1.32 appended the event type).
func legacySpamKey(event *v1.Event) string {
	return strings.Join([]string{
		event.Source.Component, event.Source.Host, event.InvolvedObject.Kind, event.InvolvedObject.Namespace,
		event.InvolvedObject.Name, string(event.InvolvedObject.UID), event.InvolvedObject.APIVersion,
	}, "")
}

func correlate(opts record.CorrelatorOptions, reportingFields bool) {
	fc := testingclock.NewFakeClock(time.Unix(0, 0))
	opts.Clock = fc
	c := record.NewEventCorrelatorWithOptions(opts)
	sink := &memSink{store: map[string]*v1.Event{}}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	i := 0
	for in.Scan() {
		var l traceLine
		if err := json.Unmarshal(in.Bytes(), &l); err != nil {
			fmt.Fprintln(os.Stderr, "bad line:", err)
			os.Exit(2)
		}
		fc.SetTime(time.Unix(0, l.Time))
		if l.Delete != nil {
			delete(sink.store, key(l.Delete.Namespace, l.Delete.Name))
			enc.Encode(decision{I: i, Action: "deleted", Namespace: l.Delete.Namespace, Name: l.Delete.Name})
			i++
			continue
		}
		if !util.ValidateEventType(l.Type) {
			enc.Encode(decision{I: i, Action: "invalid"})
			i++
			continue
		}
		if l.Object == nil {
			l.Object = &traceObject{}
		}
		ev := makeEvent(&l, fc.Now())
		res, err := c.EventCorrelate(ev)
		if err != nil {
			fmt.Fprintln(os.Stderr, "correlate error:", err)
		}
		if res.Skip {
			enc.Encode(decision{I: i, Action: "skip"})
			i++
			continue
		}
		e := res.Event
		d := decision{I: i, Namespace: e.Namespace, Name: e.Name, Count: e.Count, Type: e.Type, Reason: e.Reason,
			Message: e.Message, FirstTimestamp: ts(e.FirstTimestamp), LastTimestamp: ts(e.LastTimestamp)}
		if reportingFields {
			d.ReportingController, d.ReportingInstance = e.ReportingController, e.ReportingInstance
		}
		var newEv *v1.Event
		if e.Count > 1 {
			d.Action = "patch"
			d.Patch = json.RawMessage(res.Patch)
			newEv, err = sink.Patch(e, res.Patch)
			if apierrors.IsNotFound(err) {
				d.Action = "recreate"
				e.ResourceVersion = ""
				newEv, err = sink.Create(e)
			}
		} else {
			d.Action = "create"
			newEv, err = sink.Create(e)
		}
		if err == nil {
			c.UpdateState(newEv)
		} else if apierrors.IsAlreadyExists(err) {
			d.Action += "-conflict"
		} else {
			fmt.Fprintln(os.Stderr, "sink error:", err)
		}
		enc.Encode(d)
		i++
	}
}

// workload: n events over `objects` pods and `reasons` reasons, messages from `messages` variants.
func workloadEvent(i, objects, reasons, messages int) (*v1.Pod, string, string) {
	o := i % objects
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", o), Namespace: "bench", UID: types.UID(fmt.Sprintf("uid-%d", o))}}
	pod.Kind, pod.APIVersion = "Pod", "v1"
	return pod, fmt.Sprintf("Reason%d", (i/objects)%reasons), fmt.Sprintf("message variant %d", (i/(objects*reasons))%messages)
}

type countSink struct{ creates, patches int64 }

func (s *countSink) Create(e *v1.Event) (*v1.Event, error) {
	atomic.AddInt64(&s.creates, 1)
	return e, nil
}
func (s *countSink) Update(e *v1.Event) (*v1.Event, error) { return e, nil }
func (s *countSink) Patch(e *v1.Event, p []byte) (*v1.Event, error) {
	atomic.AddInt64(&s.patches, 1)
	return e, nil
}

func bench(n, objects, reasons, messages int) {
	// 1) correlator alone, one thread, fake clock advancing 1ms per event
	fc := testingclock.NewFakeClock(time.Unix(1600000000, 0))
	c := record.NewEventCorrelatorWithOptions(record.CorrelatorOptions{Clock: fc})
	evs := make([]*v1.Event, n)
	for i := 0; i < n; i++ {
		pod, reason, msg := workloadEvent(i, objects, reasons, messages)
		evs[i] = &v1.Event{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", pod.Name, i), Namespace: "bench"},
			InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: "bench", Name: pod.Name, UID: pod.UID, APIVersion: "v1"},
			Reason:         reason, Message: msg, Type: "Normal", Count: 1, Source: v1.EventSource{Component: "bench", Host: "node"},
			ReportingController: "bench", ReportingInstance: "node"}
	}
	var skipped, passed int
	start := time.Now()
	for i := 0; i < n; i++ {
		fc.Step(time.Millisecond)
		r, _ := c.EventCorrelate(evs[i])
		if r.Skip {
			skipped++
		} else {
			passed++
			c.UpdateState(r.Event)
		}
	}
	corrDur := time.Since(start)

	// 2) whole pipeline: recorder -> broadcaster -> sink watcher (correlator + sink)
	b := record.NewBroadcasterWithCorrelatorOptions(record.CorrelatorOptions{QPS: 1e9, BurstSize: 1 << 30})
	sink := &countSink{}
	b.StartRecordingToSink(sink)
	rec := b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "bench", Host: "node"})
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	start = time.Now()
	for i := 0; i < n; i++ {
		pod, reason, msg := workloadEvent(i, objects, reasons, messages)
		rec.Event(pod, v1.EventTypeNormal, reason, msg)
	}
	emitDur := time.Since(start)
	// wait until the sink stops moving
	last, stable := int64(-1), 0
	for stable < 20 {
		time.Sleep(5 * time.Millisecond)
		cur := atomic.LoadInt64(&sink.creates) + atomic.LoadInt64(&sink.patches)
		if cur == last {
			stable++
		} else {
			stable, last = 0, cur
		}
	}
	pipeDur := time.Since(start) - 100*time.Millisecond
	runtime.ReadMemStats(&ms1)
	b.Shutdown()
	json.NewEncoder(os.Stdout).Encode(map[string]interface{}{
		"impl": impl, "n": n, "objects": objects, "reasons": reasons, "messages": messages,
		"correlator_events_per_s": float64(n) / corrDur.Seconds(), "correlator_passed": passed, "correlator_skipped": skipped,
		"emit_ns_per_event":  float64(emitDur.Nanoseconds()) / float64(n),
		"pipeline_delivered": last, "pipeline_dropped_or_lost": int64(n) - last,
		"pipeline_events_per_s": float64(last) / pipeDur.Seconds(),
		"heap_alloc_mb":         float64(ms1.HeapAlloc) / 1e6, "goroutines_after": runtime.NumGoroutine(),
	})
}

func apiserver(kubeconfig string, n, objects, reasons, messages int, ns string) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		panic(err)
	}
	cfg.QPS, cfg.Burst = 1e6, 1e6
	cs := kubernetes.NewForConfigOrDie(cfg)
	b := record.NewBroadcaster()
	var done int64
	sink := &countingEventSink{inner: &typedv1.EventSinkImpl{Interface: cs.CoreV1().Events("")}, done: &done}
	b.StartRecordingToSink(sink)
	rec := b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "oracle", Host: "node"})
	start := time.Now()
	for i := 0; i < n; i++ {
		pod, reason, msg := workloadEvent(i, objects, reasons, messages)
		pod.Namespace = ns
		rec.Event(pod, v1.EventTypeWarning, reason, msg)
	}
	last, stable := int64(-1), 0
	for stable < 40 {
		time.Sleep(25 * time.Millisecond)
		cur := atomic.LoadInt64(&done)
		if cur == last {
			stable++
		} else {
			stable, last = 0, cur
		}
	}
	dur := time.Since(start) - time.Second
	b.Shutdown()
	list, err := cs.CoreV1().Events(ns).List(context.TODO(), metav1.ListOptions{})
	if err != nil {
		panic(err)
	}
	var total int32
	counts := []int{}
	for _, e := range list.Items {
		total += e.Count
		counts = append(counts, int(e.Count))
	}
	sort.Ints(counts)
	json.NewEncoder(os.Stdout).Encode(map[string]interface{}{
		"impl": impl, "n": n, "requests": last, "seconds": dur.Seconds(),
		"requests_per_s": float64(last) / dur.Seconds(), "stored_events": len(list.Items), "sum_count": total,
	})
}

type countingEventSink struct {
	inner record.EventSink
	done  *int64
	mu    sync.Mutex
}

func (s *countingEventSink) Create(e *v1.Event) (*v1.Event, error) {
	defer atomic.AddInt64(s.done, 1)
	return s.inner.Create(e)
}
func (s *countingEventSink) Update(e *v1.Event) (*v1.Event, error) {
	defer atomic.AddInt64(s.done, 1)
	return s.inner.Update(e)
}
func (s *countingEventSink) Patch(e *v1.Event, p []byte) (*v1.Event, error) {
	defer atomic.AddInt64(s.done, 1)
	return s.inner.Patch(e, p)
}

func main() {
	mode := flag.String("mode", "correlate", "correlate | bench | apiserver | series")
	n := flag.Int("n", 100000, "events")
	objects := flag.Int("objects", 1000, "distinct objects")
	reasons := flag.Int("reasons", 5, "distinct reasons")
	messages := flag.Int("messages", 3, "distinct messages")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig for -mode apiserver")
	ns := flag.String("namespace", "default", "namespace for -mode apiserver")
	burst := flag.Int("burst", 0, "spam filter burst (0 = default)")
	qps := flag.Float64("qps", 0, "spam filter qps (0 = default)")
	maxEvents := flag.Int("max-events", 0, "aggregation threshold (0 = default)")
	interval := flag.Int("max-interval", 0, "aggregation window seconds (0 = default)")
	lru := flag.Int("lru", 0, "LRU entries (0 = default)")
	uuidSeed := flag.Int64("uuid-seed", 1, "seed of the deterministic source behind util.GenerateEventName's UUIDs (0 = crypto/rand, nondeterministic)")
	reportingFields := flag.Bool("reporting-fields", false, "correlate: add reportingController/reportingInstance of the event as sent to each decision")
	legacySpam := flag.Bool("legacy-spam-key", false, "correlate: use v1.20's spam key (without the event type), to attribute differences")
	flag.BoolVar(&legacyNames, "legacy-names", false, "correlate: name events \"%v.%x\" as v1.20 did, even when invalid (no UUID)")
	ticks := flag.String("ticks", "manual", "series: manual (only tick lines run refresh/finish) | auto (also on wait.Until's schedule: at the first line's time, then every 30 min / 6 min)")
	hostname := flag.String("hostname", "oracle-host", "series: hostname in the default reportingInstance (<controller>-<hostname>), used when a line has no reportingInstance")
	all := flag.Bool("all", false, "series: also print a {\"verb\":\"none\"} line for input lines that cause no sink call, saying why")
	klogStderr := flag.Bool("klog", false, "bench: print client-go's log lines (v0.36 logs one per dropped event) instead of discarding them (they are formatted either way)")
	flag.Parse()
	if *mode == "bench" && !*klogStderr {
		fs := flag.NewFlagSet("klog", flag.ContinueOnError)
		klog.InitFlags(fs)
		fs.Set("logtostderr", "false")
		fs.Set("alsologtostderr", "false")
		fs.Set("stderrthreshold", "FATAL")
		klog.SetOutput(io.Discard)
	}
	if *uuidSeed != 0 {
		// util.GenerateEventName falls back to uuid.New() (crypto/rand) for names that are not valid
		// DNS-1123 subdomains; a seeded source keeps replays reproducible.
		uuid.SetRand(rand.New(rand.NewSource(*uuidSeed)))
	}
	switch *mode {
	case "correlate":
		opts := record.CorrelatorOptions{BurstSize: *burst, QPS: float32(*qps), MaxEvents: *maxEvents,
			MaxIntervalInSeconds: *interval, LRUCacheSize: *lru}
		if *legacySpam {
			opts.SpamKeyFunc = legacySpamKey
		}
		correlate(opts, *reportingFields)
	case "bench":
		bench(*n, *objects, *reasons, *messages)
	case "apiserver":
		apiserver(*kubeconfig, *n, *objects, *reasons, *messages, *ns)
	case "series":
		series(*ticks, *hostname, *all)
	default:
		fmt.Fprintln(os.Stderr, "unknown -mode", *mode)
		os.Exit(2)
	}
}
