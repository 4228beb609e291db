package api

// Readiness is the body of GET /readyz (200 when Ready, else 503) and of
// the landing page's JSON form: whether the server can start sandboxes
// now, what it waits for before it can, and the work it has under way.
type Readiness struct {
	Status string `json:"status"` // ok | unavailable
	Ready  bool   `json:"ready"`
	// Checks are the probes by name ("store", "runtime", "template
	// default"): ok, or what is wrong in a word (unavailable, building).
	Checks map[string]string `json:"checks,omitempty"`
	// Waiting is what readiness waits for: the default template's first
	// image, while it builds.
	Waiting []Work `json:"waiting,omitempty"`
	// Building is work under way that readiness does not wait for: the
	// default template's next stage while an earlier one serves, a
	// built-in template built on first use.
	Building []Work `json:"building,omitempty"`
	// Live names, by built-in template, the stage its sandboxes start
	// from now ("core", "full"; "previous" for an image the store had
	// before this daemon built one; "" for a template of one stage).
	Live map[string]string `json:"live,omitempty"`
	// Guard says what the egress guard detects with: whether its entity
	// model is loaded, and the memory it takes beside the daemon's own.
	// A guard without its model still scans with its patterns and entity
	// rules: it does not make the server unready.
	Guard *GuardHealth `json:"guard,omitempty"`
}

// GuardHealth is the egress guard's part of Readiness.
type GuardHealth struct {
	// EntityModel names the model ("prose/v2.0.0 en"); State is "loaded",
	// or "unavailable" with Error saying why (the guard then runs its
	// patterns and entity rules alone).
	EntityModel string `json:"entityModel,omitempty"`
	State       string `json:"state"`
	Error       string `json:"error,omitempty"`
	// ModelBytes is the heap the model's weights take; DaemonHeapBytes is
	// the daemon's whole heap in use (the model included).
	ModelBytes      int64 `json:"modelBytes,omitempty"`
	DaemonHeapBytes int64 `json:"daemonHeapBytes"`
}

// Work is one piece of work under way: a template's image being built.
type Work struct {
	What string `json:"what"` // "template default"
	// Stage is the image being built, the StageIndex-th of Stages, of a
	// template built in stages ("core" then "full").
	Stage      string `json:"stage,omitempty"`
	StageIndex int    `json:"stageIndex,omitempty"`
	Stages     int    `json:"stages,omitempty"`
	// Step of Steps is the build's step, Phase what it does.
	Step  int    `json:"step"`
	Steps int    `json:"steps"`
	Phase string `json:"phase"`
	// Done of Total packages of the step are set up; Package is the one
	// at work now (absent in steps that count none).
	Done    int    `json:"done,omitempty"`
	Total   int    `json:"total,omitempty"`
	Package string `json:"package,omitempty"`
	// ElapsedSeconds since the build started; ETASeconds estimates what
	// is left of this step from its pace (absent without an estimate).
	ElapsedSeconds int64 `json:"elapsedSeconds"`
	ETASeconds     int64 `json:"etaSeconds,omitempty"`
	// Error says the last build failed (the server's log says why; a use
	// after a minute starts another).
	Error string `json:"error,omitempty"`
}

// Landing is the JSON form of the page at the server's root (GET / with
// Accept other than text/html): the version, readiness and where to go.
type Landing struct {
	Name      string    `json:"name"` // "sandlot"
	Version   string    `json:"version"`
	Readiness Readiness `json:"readiness"`
	// Links name what a visitor may open: openapi (the /v1 API's
	// document), docs, console (when the server has one).
	Links map[string]string `json:"links"`
}
