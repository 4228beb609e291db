// Package landing is the page a browser gets at the daemon's root: its
// version, whether it is ready, the template builds under way with their
// progress, and links to the /v1 API's OpenAPI document, the docs and
// the console (when there is one). A client that does not ask for HTML
// gets the same as JSON (api.Landing). The page is self-contained (no
// script, no external asset, one inline style allowed by its hash in a
// strict Content-Security-Policy) and refreshes itself while a build
// runs.
package landing

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandlot/sandlot/api"
)

// DocsURL is where the docs are read when Config.Docs is empty.
const DocsURL = "https://github.com/sandlot/sandlot/tree/main/docs"

// Config is what the page shows.
type Config struct {
	// Version is the daemon's; "": "devel".
	Version string
	// Readiness is the server's readiness (/readyz's status and body).
	Readiness func(ctx context.Context) (int, api.Readiness)
	// Docs is the documentation's address; "": DocsURL.
	Docs string
	// Console is the path of the web console; "": none, no link.
	Console string
}

// New returns the handler of GET and HEAD / (the front door sends it
// nothing else).
func New(cfg Config) http.Handler {
	if cfg.Version == "" {
		cfg.Version = "devel"
	}
	if cfg.Docs == "" {
		cfg.Docs = DocsURL
	}
	return &handler{cfg: cfg}
}

type handler struct{ cfg Config }

// refresh is how often the page reloads itself while work is under way.
const refresh = 5 * time.Second

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, ready := h.cfg.Readiness(r.Context())
	doc := api.Landing{Name: "sandlot", Version: h.cfg.Version, Readiness: ready,
		Links: map[string]string{"openapi": "/v1/openapi.json", "docs": h.cfg.Docs, "readiness": "/readyz"}}
	if h.cfg.Console != "" {
		doc.Links["console"] = h.cfg.Console
	}
	hdr := w.Header()
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Vary", "Accept")
	if !wantsHTML(r.Header.Get("Accept")) {
		b, _ := json.Marshal(doc)
		hdr.Set("Content-Type", api.ContentTypeJSON)
		hdr.Set("Content-Length", strconv.Itoa(len(b)+1))
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			_, _ = w.Write(append(b, '\n'))
		}
		return
	}
	var buf bytes.Buffer
	if err := page.Execute(&buf, view(doc)); err != nil {
		http.Error(w, "the page could not be made", http.StatusInternalServerError)
		return
	}
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Content-Security-Policy", csp)
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(buf.Bytes())
	}
}

// wantsHTML reports whether an Accept header asks for HTML (a browser's
// does), by the media types it names, not their weights: a client that
// names text/html wants the page.
func wantsHTML(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		mt, _, _ := strings.Cut(part, ";")
		mt = strings.ToLower(strings.TrimSpace(mt))
		if mt == "text/html" || mt == "application/xhtml+xml" {
			return true
		}
	}
	return false
}

// pageView is what the template shows.
type pageView struct {
	Version string
	Ready   bool
	Status  string
	Refresh int // seconds; 0: no reload
	Live    []string
	Work    []workView
	Links   []link
}

type workView struct {
	Title, Detail string
	Waited        bool // readiness waits for it
	Value, Max    int  // a bar of packages set up; Max 0: none
	Error         string
}

type link struct{ Name, Href string }

// view arranges doc for the page.
func view(doc api.Landing) pageView {
	rd := doc.Readiness
	v := pageView{Version: doc.Version, Ready: rd.Ready, Status: "ready"}
	if !rd.Ready {
		v.Status = "not ready"
		var why []string
		for _, name := range sortedKeys(rd.Checks) {
			if c := rd.Checks[name]; c != "ok" {
				why = append(why, name+": "+c)
			}
		}
		if len(why) > 0 {
			v.Status += " (" + strings.Join(why, ", ") + ")"
		}
	}
	for _, name := range sortedKeys(rd.Live) {
		stage := rd.Live[name]
		if stage == "" {
			v.Live = append(v.Live, "template "+name+": built")
			continue
		}
		v.Live = append(v.Live, "template "+name+": sandboxes start from its "+stage+" image")
	}
	add := func(ws []api.Work, waited bool) {
		for _, w := range ws {
			v.Work = append(v.Work, workOf(w, waited))
		}
	}
	add(rd.Waiting, true)
	add(rd.Building, false)
	for _, w := range v.Work {
		if w.Error == "" {
			v.Refresh = int(refresh / time.Second)
		}
	}
	if !rd.Ready {
		v.Refresh = int(refresh / time.Second)
	}
	for _, name := range []string{"openapi", "docs", "console", "readiness"} {
		if href, ok := doc.Links[name]; ok {
			v.Links = append(v.Links, link{Name: linkNames[name], Href: href})
		}
	}
	return v
}

var linkNames = map[string]string{
	"openapi":   "the API (OpenAPI document)",
	"docs":      "the documentation",
	"console":   "the console",
	"readiness": "readiness (JSON)",
}

func workOf(w api.Work, waited bool) workView {
	title := w.What
	if w.Stage != "" {
		title += fmt.Sprintf(", stage %s (%d of %d)", w.Stage, w.StageIndex, w.Stages)
	}
	detail := fmt.Sprintf("step %d of %d: %s", w.Step, w.Steps, w.Phase)
	if w.Total > 0 {
		detail += fmt.Sprintf(", %d of %d packages set up", w.Done, w.Total)
		if w.Package != "" {
			detail += " (now " + w.Package + ")"
		}
	}
	if w.ETASeconds > 0 {
		detail += fmt.Sprintf(", about %s left in this step", time.Duration(w.ETASeconds)*time.Second)
	}
	detail += fmt.Sprintf("; %s since the build started", time.Duration(w.ElapsedSeconds)*time.Second)
	wv := workView{Title: title, Detail: detail, Waited: waited, Value: w.Done, Max: w.Total, Error: w.Error}
	if w.Total == 0 && w.Steps > 0 {
		wv.Value, wv.Max = w.Step, w.Steps
	}
	return wv
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// style is the page's one inline style, allowed by its hash (csp).
const style = `body{font-family:system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem;color:#222}
h1{font-size:1.6rem;margin-bottom:.2rem}.v{color:#666}.ok{color:#17692e}.no{color:#a33}
progress{width:100%}li{margin:.3rem 0}.err{color:#a33}section{margin:1.2rem 0}`

// csp allows nothing but the inline style (by its hash): no script, no
// request to anywhere, no framing, no form.
var csp = func() string {
	sum := sha256.Sum256([]byte(style))
	return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
		"'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}()

var page = template.Must(template.New("landing").Funcs(template.FuncMap{"style": func() template.CSS { return template.CSS(style) }}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
{{if .Refresh}}<meta http-equiv="refresh" content="{{.Refresh}}">{{end}}
<title>sandlot {{if .Ready}}(ready){{else}}(not ready){{end}}</title>
<style>{{style}}</style></head>
<body>
<h1>sandlot</h1>
<p class="v">version {{.Version}}</p>
<p>Status: {{if .Ready}}<strong class="ok">{{.Status}}</strong>{{else}}<strong class="no">{{.Status}}</strong>{{end}}</p>
{{if .Live}}<ul>{{range .Live}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{if .Work}}<section><h2>Builds</h2>{{range .Work}}
<p><strong>{{.Title}}</strong>{{if .Waited}} (readiness waits for it){{end}}<br>
{{if .Error}}<span class="err">{{.Error}}</span>{{else}}{{.Detail}}{{if .Max}}<br><progress value="{{.Value}}" max="{{.Max}}">{{.Value}}/{{.Max}}</progress>{{end}}{{end}}</p>
{{end}}{{if .Refresh}}<p class="v">This page reloads every {{.Refresh}} s.</p>{{end}}</section>{{end}}
<section><h2>Links</h2><ul>{{range .Links}}<li><a href="{{.Href}}">{{.Name}}</a></li>{{end}}</ul></section>
</body></html>
`))
