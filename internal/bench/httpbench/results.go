package httpbench

// The JSON files the TestLive… functions write into -live.out, and that
// cmd/report renders. Times are in the unit their field name says.

// Files in the results directory.
const (
	HTTPFile        = "http.json"
	HiddenFile      = "hidden.json"
	RideThroughFile = "ridethrough.json"
)

// LoadAvg is the 1-minute load average of the machine when a measurement
// began and ended, to tell a quiet run from a noisy one.
type LoadAvg struct {
	Start float64 `json:"start"`
	End   float64 `json:"end"`
}

// HTTPResult is the HTTP table: one entry per store.
type HTTPResult struct {
	Quick   bool    `json:"quick"`
	LoadAvg LoadAvg `json:"load_avg"`
	// Rounds of Seconds each, for every measurement.
	Rounds  int     `json:"rounds"`
	Seconds float64 `json:"seconds"`
	// WrkThreads is wrk's -t; ThroughputConns are the -c of the
	// throughput rows, BatchConns that of the batches, and LatencyConns
	// the open-loop generator's connection count.
	WrkThreads      int          `json:"wrk_threads"`
	ThroughputConns []int        `json:"throughput_conns"`
	BatchConns      int          `json:"batch_conns"`
	LatencyConns    int          `json:"latency_conns"`
	Batch           int          `json:"batch"`
	Stores          []HTTPStore  `json:"stores"`
	Skipped         []SkipReason `json:"skipped,omitempty"`
}

// SkipReason names a store that was not measured, and why.
type SkipReason struct {
	Store  string `json:"store"`
	Reason string `json:"reason"`
}

// HTTPStore is one store's measurements, each slice one value per round.
type HTTPStore struct {
	Store string `json:"store"`
	// Throughput at each of HTTPResult.ThroughputConns, with the server's
	// CPU time.
	Throughput []Throughput `json:"throughput"`
	// Latency at LatencyRate requests/s, half of idgen's median maximum
	// for idgen and for the floor at the same rate, interleaved.
	LatencyRate  float64     `json:"latency_rate"`
	IdgenLatency []Latencies `json:"idgen_latency"`
	FloorLatency []Latencies `json:"floor_latency"`
	// Batches of HTTPResult.Batch IDs, as JSON and as text/plain.
	BatchJSON []WrkResult `json:"batch_json"`
	BatchText []WrkResult `json:"batch_text"`
}

// Throughput is wrk at one connection count: rounds interleaved floor,
// idgen, floor, idgen…, each with the CPU time of the server measured.
type Throughput struct {
	Conns int         `json:"conns"`
	Floor []WrkResult `json:"floor"`
	Idgen []WrkResult `json:"idgen"`
}

// HiddenResult is the hidden-latency table: one run with the dynamic step
// and one with a fixed step, against a store Delay away.
type HiddenResult struct {
	Quick   bool        `json:"quick"`
	LoadAvg LoadAvg     `json:"load_avg"`
	DelayMS float64     `json:"delay_ms"`
	RowStep int64       `json:"row_step"`
	Rate    float64     `json:"rate"`
	Seconds float64     `json:"seconds"`
	Conns   int         `json:"conns"`
	Store   string      `json:"store"`
	Runs    []HiddenRun `json:"runs"`
}

// HiddenRun is one step policy's run.
type HiddenRun struct {
	Dynamic bool `json:"dynamic"`
	// Latencies of the requests; Requests = OK + Failed.
	Latencies Latencies `json:"latencies"`
	Requests  int       `json:"requests"`
	// Waits counts calls of segment.Observer.WaitedForLoad, not counting
	// the first segment's. A request can wait more than once, when the
	// segment it waited for runs out before its turn.
	Waits int `json:"waits"`
	// Slow counts requests that spent at least half the store's delay in
	// the server (answer minus send time): nothing but a wait on a load
	// takes that long.
	Slow int `json:"slow"`
	// WaitsAfter1s counts the waits more than a second into the run.
	WaitsAfter1s int `json:"waits_after_1s"`
	// LastWaitS is when the last wait happened, in seconds into the run;
	// -1 without waits.
	LastWaitS float64 `json:"last_wait_s"`
	// Loads and LastStep describe the reservations made during the run.
	Loads    int   `json:"loads"`
	LastStep int64 `json:"last_step"`
}

// RideThroughResult is the ride-through table. Times are seconds since the
// load began unless named otherwise.
type RideThroughResult struct {
	Quick   bool    `json:"quick"`
	LoadAvg LoadAvg `json:"load_avg"`
	Store   string  `json:"store"`
	Rate    float64 `json:"rate"`
	WarmupS float64 `json:"warmup_s"`
	// At the moment the stop was issued: the allocator's dynamic step,
	// the IDs left in both buffers, whether a load was in flight, and the
	// rate IDs were served at over the second before.
	StepAtStop     int64   `json:"step_at_stop"`
	BufferedAtStop int64   `json:"buffered_at_stop"`
	LoadingAtStop  bool    `json:"loading_at_stop"`
	ServedRate     float64 `json:"served_rate"`
	PredictedS     float64 `json:"predicted_s"`
	// StopCalledS is when dbtest Stop was called, DBDownS when a fresh
	// connection first failed, StopReturnedS when Stop returned.
	StopCalledS   float64 `json:"stop_called_s"`
	DBDownS       float64 `json:"db_down_s"`
	StopReturnedS float64 `json:"stop_returned_s"`
	// FirstFailureS is the first request due after DBDownS that failed;
	// RideThroughS = FirstFailureS - DBDownS. IDsDuringOutage counts IDs
	// served between DBDownS and FirstFailureS. Capped reports that IDs
	// were still flowing when the outage was ended at RestartCalledS.
	FirstFailureS   float64 `json:"first_failure_s"`
	RideThroughS    float64 `json:"ride_through_s"`
	IDsDuringOutage int     `json:"ids_during_outage"`
	Capped          bool    `json:"capped"`
	// RestartCalledS is when dbtest Restart was called, DBUpS when a fresh
	// connection first succeeded again, FirstSuccessS the first request
	// answered 200 after the failures began, and LastFailureS the last
	// failed request of the run.
	RestartCalledS float64 `json:"restart_called_s"`
	DBUpS          float64 `json:"db_up_s"`
	FirstSuccessS  float64 `json:"first_success_s"`
	LastFailureS   float64 `json:"last_failure_s"`
	// RecoveryS = FirstSuccessS - DBUpS.
	RecoveryS float64 `json:"recovery_s"`
	// Failed counts requests that failed in the whole run.
	Failed   int `json:"failed"`
	Requests int `json:"requests"`
}
