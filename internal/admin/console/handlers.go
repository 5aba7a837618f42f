package console

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/province/opstate"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

//go:embed assets
var assets embed.FS

// staticFS serves assets/static as static/.
var staticFS = func() fs.FS {
	f, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return f
}()

type pages struct {
	t map[string]*template.Template
}

// pageNames maps a page's path under Prefix to its template and title.
var pageNames = map[string][2]string{
	"":       {"province", "Province"},
	"rates":  {"rates", "Live rates"},
	"health": {"health", "Health"},
	"drills": {"drills", "Drills"},
	"qoe":    {"qoe", "QoE and topology"},
}

var funcs = template.FuncMap{
	"secs": func(s float64) string {
		switch {
		case s < 0:
			return "-"
		case s < 10:
			return strconv.FormatFloat(s, 'f', 1, 64) + "s"
		case s < 3600:
			return (time.Duration(s) * time.Second).String()
		}
		return (time.Duration(s/60) * time.Minute).String()
	},
	"clock": func(ms int64) string {
		if ms == 0 {
			return "-"
		}
		return time.UnixMilli(ms).Local().Format("2006-01-02 15:04:05")
	},
	"pct":  func(f float64) string { return strconv.FormatFloat(100*f, 'f', 2, 64) + "%" },
	"kbps": kbps,
	// planRow is one row of the plans table: the city planned, who, why.
	"planRow": func(city, id, note string, q QoE) planRow { return planRow{City: city, ID: id, Note: note, Q: q} },
	"num":     func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"lower":   strings.ToLower,
}

type planRow struct {
	City, ID, Note string
	Q              QoE
}

// kbps is a bandwidth for people: "850 kb/s", "12.5 Mb/s", "3.20 Gb/s".
func kbps(k float64) string {
	switch {
	case k <= 0:
		return "-"
	case k < 1000:
		return strconv.FormatFloat(k, 'f', 0, 64) + " kb/s"
	case k < 1e6:
		return strconv.FormatFloat(k/1e3, 'f', 1, 64) + " Mb/s"
	}
	return strconv.FormatFloat(k/1e6, 'f', 2, 64) + " Gb/s"
}

func parsePages() (*pages, error) {
	p := &pages{t: map[string]*template.Template{}}
	for _, n := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "assets/templates/layout.html", "assets/templates/"+n[0]+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", n[0], err)
		}
		p.t[n[0]] = t
	}
	return p, nil
}

// pageData is what a page template renders: the first view, which the
// page's script then redraws from the JSON endpoints.
type pageData struct {
	Page, Title string
	Prefix      string
	Who         Who
	CSRF        string
	Scheduler   string
	Lab         bool
	Province    *Province
	Servers     *ServersView
	Drills      []DrillRun
	History     *HistoryView
	Err         string
}

func (con *Console) page(path string) http.HandlerFunc {
	name := pageNames[path]
	return func(w http.ResponseWriter, r *http.Request) {
		c := con.caller(r)
		if c.Identity == "" {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, "the console needs a client certificate of admin.tls.client_ca_file (or a loopback listener); %s has none\n", r.RemoteAddr) //nolint:gosec // G705: text/plain, never rendered as HTML
			return
		}
		ctx := r.Context()
		who, err := con.whoami(ctx, c)
		if err != nil {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(httpCode(err))
			fmt.Fprintln(w, serrMessage(err)) //nolint:gosec // G705: text/plain, never rendered as HTML
			return
		}
		d := pageData{Page: name[0], Title: name[1], Prefix: Prefix, Who: who, CSRF: con.csrfToken(con.session(w, r), c),
			Scheduler: con.c.Scheduler, Lab: con.c.Service.Lab}
		var errs []string
		note := func(err error) {
			if err != nil {
				errs = append(errs, serrMessage(err))
			}
		}
		switch name[0] {
		case "province", "drills", "qoe", "rates":
			d.Province, err = con.province(ctx, c, name[0] == "qoe")
			note(err)
		case "health":
			d.Servers, err = con.servers(ctx, c)
			note(err)
		}
		switch name[0] {
		case "drills":
			note(con.discoverDrills(ctx, c)) // the page shows the drills known so far, and why there may be more
			d.Drills = con.drills.list()
		case "qoe":
			d.History, err = con.history(ctx, c)
			note(err)
		}
		d.Err = strings.Join(errs, "; ")
		var buf bytes.Buffer
		if err := con.pages.t[name[0]].Execute(&buf, d); err != nil {
			con.c.Logger.Error("console page", "page", name[0], "err", err)
			http.Error(w, "console: rendering failed", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = buf.WriteTo(w)
	}
}

// read wraps a JSON read: an authenticated caller and the view it asks for.
func (con *Console) read(w http.ResponseWriter, r *http.Request, view func(context.Context, authz.Caller) (any, error)) {
	c := con.caller(r)
	if c.Identity == "" {
		fail(w, r, status.Error(codes.Unauthenticated, "no verified client certificate"))
		return
	}
	v, err := view(r.Context(), c)
	if err != nil {
		fail(w, r, err)
		return
	}
	reply(w, v)
}

func (con *Console) apiWhoAmI(w http.ResponseWriter, r *http.Request) {
	con.read(w, r, func(ctx context.Context, c authz.Caller) (any, error) { return con.whoami(ctx, c) })
}

func (con *Console) apiProvince(w http.ResponseWriter, r *http.Request) {
	// ?qoe=history: with each region's QoE and its history (the QoE page).
	withQoE := r.FormValue("qoe") == "history"
	con.read(w, r, func(ctx context.Context, c authz.Caller) (any, error) { return con.province(ctx, c, withQoE) })
}

func (con *Console) apiHealth(w http.ResponseWriter, r *http.Request) {
	con.read(w, r, func(ctx context.Context, c authz.Caller) (any, error) { return con.servers(ctx, c) })
}

func (con *Console) apiHistory(w http.ResponseWriter, r *http.Request) {
	con.read(w, r, func(ctx context.Context, c authz.Caller) (any, error) { return con.history(ctx, c) })
}

func (con *Console) apiDiff(w http.ResponseWriter, r *http.Request) {
	con.read(w, r, func(ctx context.Context, c authz.Caller) (any, error) { return con.diff(ctx, c, r) })
}

// drillsView is the drills page's data.
type drillsView struct {
	Runs []DrillRun `json:"runs"`
}

func (con *Console) apiDrills(w http.ResponseWriter, r *http.Request) {
	con.read(w, r, func(ctx context.Context, c authz.Caller) (any, error) {
		if err := con.discoverDrills(ctx, c); err != nil {
			return nil, err
		}
		return drillsView{Runs: con.drills.list()}, nil
	})
}

// discoverDrills follows drills in force that this console did not start
// (schedctl's, another center's console).
func (con *Console) discoverDrills(ctx context.Context, c authz.Caller) error {
	var ds []opstate.Drill
	if err := con.call(ctx, c, pb.Admin_Status_FullMethodName, func(ctx context.Context) (err error) {
		ds, err = con.c.Service.Drills(ctx)
		return err
	}); err != nil {
		return err
	}
	now := time.Now()
	for _, d := range ds {
		if d.Until.After(now) {
			con.drills.track(d, "", nil, nil, c)
		}
	}
	return nil
}

// done answers a change: JSON to the page's script, a redirect back to the
// page for a plain form.
func done(w http.ResponseWriter, r *http.Request, back string, v any) {
	if r.Header.Get("X-CSRF-Token") == "" {
		http.Redirect(w, r, Prefix+back, http.StatusSeeOther)
		return
	}
	reply(w, v)
}

type drainResult struct {
	Servers int32 `json:"servers"`
	Changed bool  `json:"changed"`
}

func (con *Console) postDrain(w http.ResponseWriter, r *http.Request, c authz.Caller) {
	req := &pb.DrainRequest{Kind: r.PostFormValue("kind"), Name: r.PostFormValue("name"), Reason: r.PostFormValue("reason")}
	if req.Reason == "" {
		req.Reason = "drained from the console by " + c.Identity
	}
	var resp *pb.DrainResponse
	err := con.call(r.Context(), c, pb.Admin_Drain_FullMethodName, func(ctx context.Context) (err error) {
		resp, err = con.c.Service.Drain(ctx, req)
		return err
	})
	if err != nil {
		fail(w, r, err)
		return
	}
	done(w, r, "health", drainResult{Servers: resp.GetServers(), Changed: resp.GetChanged()})
}

func (con *Console) postUndrain(w http.ResponseWriter, r *http.Request, c authz.Caller) {
	req := &pb.UndrainRequest{Kind: r.PostFormValue("kind"), Name: r.PostFormValue("name")}
	var resp *pb.DrainResponse
	err := con.call(r.Context(), c, pb.Admin_Undrain_FullMethodName, func(ctx context.Context) (err error) {
		resp, err = con.c.Service.Undrain(ctx, req)
		return err
	})
	if err != nil {
		fail(w, r, err)
		return
	}
	done(w, r, "health", drainResult{Servers: resp.GetServers(), Changed: resp.GetChanged()})
}

type drillResult struct {
	Until     int64    `json:"until"`
	Instances []string `json:"instances"`
}

func (con *Console) postDrill(w http.ResponseWriter, r *http.Request, c authz.Caller) {
	secs, err := strconv.ParseFloat(r.PostFormValue("duration"), 64)
	if err != nil || math.IsNaN(secs) {
		fail(w, r, status.Errorf(codes.InvalidArgument, "duration: %q is not a number of seconds", r.PostFormValue("duration")))
		return
	}
	req := &pb.DrillRequest{Region: r.PostFormValue("region"), DurationSeconds: secs, ProductionConfirmed: r.PostFormValue("production") == "on"}
	var pre *pb.StatusResponse
	_ = con.call(r.Context(), c, pb.Admin_Status_FullMethodName, func(ctx context.Context) (err error) {
		pre, err = con.c.Service.Status(ctx, &pb.StatusRequest{})
		return err
	}) // the centers' counts before: without them the takeover counts from the first sight
	var resp *pb.DrillResponse
	start := time.Now()
	err = con.call(r.Context(), c, pb.Admin_Drill_FullMethodName, func(ctx context.Context) (err error) {
		resp, err = con.c.Service.Drill(ctx, req)
		return err
	})
	if err != nil {
		fail(w, r, err)
		return
	}
	target, _ := opstate.ParseDrillTarget(req.Region) // the RPC checked it
	ins := resp.GetInstances()
	sort.Strings(ins)
	con.drills.track(opstate.Drill{Target: target, Started: start, Until: resp.GetUntil().AsTime()}, c.Identity, ins, pre, c)
	done(w, r, "drills", drillResult{Until: resp.GetUntil().AsTime().UnixMilli(), Instances: ins})
}
