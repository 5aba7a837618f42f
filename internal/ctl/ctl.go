// Package ctl is schedctl, the operator CLI: it talks to the central
// scheduler's admin gRPC API. It lives here, not in package main, so tests run
// it in-process against real daemons.
package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/anysched/anysched/internal/adminapi"
	"github.com/anysched/anysched/internal/config"
	"github.com/anysched/anysched/internal/tlsutil"
	"github.com/anysched/anysched/internal/token"
	"github.com/anysched/anysched/internal/topology"
	"github.com/anysched/anysched/internal/version"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"gopkg.in/yaml.v3"
)

const usage = `schedctl: operate an anysched province through the central scheduler.

Usage:
  schedctl [global flags] apply -f FILE [--dry-run] [--force] [--base-revision N]
  schedctl [global flags] get topology|regions|nodes|servers|zones|services [-o table|yaml|json]
  schedctl [global flags] status [-o table|json]
  schedctl [global flags] explain --client-ip IP --host HOST [--path PATH] [--region R] [-o table|json]
  schedctl [global flags] drain server|node|region NAME [--reason TEXT]
  schedctl [global flags] undrain server|node|region NAME
  schedctl [global flags] drill failover --region R --duration D [--i-know-this-is-production] [--no-watch]
  schedctl [global flags] drill etcd-loss --duration D [--members N] [--leader]   (lab only; N of the lab's etcd members, default all; --leader: the leader first)
  schedctl token --key-id ID --secret-file FILE --sub VIEWER [--ttl D] [--desired-kbps N] [--danmaku-per-hour N] [--gift N]
  schedctl version

Global flags:
`

// ErrUsage marks a command-line mistake (exit code 2).
var ErrUsage = errors.New("usage error")

type globals struct {
	server  string
	tls     config.ClientTLS
	timeout time.Duration
}

// Run executes one schedctl command.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("schedctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var g globals
	def := os.Getenv("ANYSCHED_SERVER")
	if def == "" {
		def = "127.0.0.1:9090"
	}
	fs.StringVar(&g.server, "server", def, "central scheduler admin gRPC address (env ANYSCHED_SERVER)")
	fs.StringVar(&g.tls.CAFile, "tls-ca", "", "CA certificate that signed the server's certificate (enables TLS)")
	fs.StringVar(&g.tls.CertFile, "tls-cert", "", "client certificate for mutual TLS")
	fs.StringVar(&g.tls.KeyFile, "tls-key", "", "client key for mutual TLS")
	fs.StringVar(&g.tls.ServerName, "tls-server-name", "", "server name to verify, if not the host of --server")
	fs.DurationVar(&g.timeout, "timeout", 60*time.Second, "deadline for the whole command")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return ErrUsage
	}
	cmd, rest := rest[0], rest[1:]
	switch cmd {
	case "version":
		fmt.Fprintln(stdout, "schedctl", versionString())
		return nil
	case "token":
		return tokenCmd(rest, stdout)
	}
	timeout := g.timeout
	if cmd == "drill" && !flagSet(fs, "timeout") {
		// A drill is bounded by its own --duration and followed to the end;
		// the 60 s default would cut long drills short.
		timeout = drillTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	run := map[string]func(context.Context, pb.AdminClient, []string, io.Writer) error{
		"apply": apply, "get": get, "status": statusCmd, "explain": explainCmd, "drain": drainCmd, "undrain": undrainCmd, "drill": drillCmd,
	}[cmd]
	if run == nil {
		fs.Usage()
		return fmt.Errorf("%w: unknown command %q", ErrUsage, cmd)
	}
	conn, err := dial(g)
	if err != nil {
		return err
	}
	defer conn.Close()
	return run(ctx, pb.NewAdminClient(conn), rest, stdout)
}

// drillTimeout bounds a drill command when --timeout is not given.
const drillTimeout = time.Hour

// flagSet reports whether the named flag was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func dial(g globals) (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if g.tls.Enabled() {
		tc, err := tlsutil.Client(g.tls)
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(tc)
	}
	return grpc.NewClient(g.server,
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(adminapi.MaxMessageBytes), grpc.MaxCallSendMsgSize(adminapi.MaxMessageBytes)),
	)
}

func apply(ctx context.Context, c pb.AdminClient, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("apply", flag.ContinueOnError)
	file := fs.String("f", "", "topology file (YAML); - for standard input")
	dry := fs.Bool("dry-run", false, "validate on the server, store nothing")
	force := fs.Bool("force", false, "apply even if the document is based on an older revision")
	base := fs.Int64("base-revision", 0, "the revision the document was based on (default: its revision: field)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if *file == "" {
		return fmt.Errorf("%w: apply needs -f FILE", ErrUsage)
	}
	var doc []byte
	var err error
	if *file == "-" {
		doc, err = io.ReadAll(os.Stdin)
	} else {
		doc, err = os.ReadFile(*file)
	}
	if err != nil {
		return err
	}
	resp, err := c.ApplyTopology(ctx, &pb.ApplyTopologyRequest{Document: doc, DryRun: *dry, Force: *force, BaseRevision: *base})
	if err != nil {
		return explain(err)
	}
	s := resp.GetSummary()
	counts := fmt.Sprintf("%d regions, %d nodes, %d servers, %d zones (%d networks), %d services", s.GetRegions(), s.GetNodes(), s.GetServers(), s.GetZones(), s.GetNetworks(), s.GetServices())
	switch {
	case *dry && resp.GetChanged():
		fmt.Fprintf(out, "valid: %s; would replace revision %d\n", counts, resp.GetRevision())
	case *dry:
		fmt.Fprintf(out, "valid: %s; identical to revision %d\n", counts, resp.GetRevision())
	case resp.GetApplied():
		fmt.Fprintf(out, "applied revision %d: %s\n", resp.GetRevision(), counts)
	default:
		fmt.Fprintf(out, "unchanged: revision %d already holds this topology\n", resp.GetRevision())
	}
	return nil
}

// explain renders an API error with every field violation on its own line.
func explain(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	var b strings.Builder
	b.WriteString(st.Message())
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				if v.GetField() == "" {
					fmt.Fprintf(&b, "\n  %s", v.GetDescription())
				} else {
					fmt.Fprintf(&b, "\n  %s: %s", v.GetField(), v.GetDescription())
				}
			}
		}
	}
	if st.Code() == codes.Unavailable {
		b.WriteString("\n(is the central scheduler running and reachable? see --server)")
	}
	return errors.New(b.String())
}

func outputFlag(fs *flag.FlagSet) *string {
	return fs.String("o", "table", "output format: table, yaml or json")
}

func get(ctx context.Context, c pb.AdminClient, args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: get what? topology, regions, nodes, servers, zones or services", ErrUsage)
	}
	what := args[0]
	fs := flag.NewFlagSet("get", flag.ContinueOnError)
	format := outputFlag(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	resp, err := c.GetTopology(ctx, &pb.GetTopologyRequest{})
	if err != nil {
		return explain(err)
	}
	if what == "topology" && *format != "json" {
		_, err := out.Write(resp.GetDocument())
		return err
	}
	t, err := topology.Decode(resp.GetDocument())
	if err != nil {
		return fmt.Errorf("the server sent a document this schedctl cannot read: %w", err)
	}
	var rows any
	var table func(*tabwriter.Writer)
	switch what {
	case "topology":
		rows = t
	case "regions":
		rows = t.Regions
		table = func(w *tabwriter.Writer) {
			fmt.Fprintln(w, "NAME\tLAT\tLON\tFALLBACK")
			for _, r := range t.Regions {
				fmt.Fprintf(w, "%s\t%.4f\t%.4f\t%s\n", r.Name, r.Location.Lat, r.Location.Lon, strings.Join(r.Fallback, ","))
			}
		}
	case "nodes":
		rows = t.Nodes
		table = func(w *tabwriter.Writer) {
			fmt.Fprintln(w, "NAME\tREGION\tSERVERS\tLAT\tLON")
			for _, n := range t.Nodes {
				fmt.Fprintf(w, "%s\t%s\t%d\t%.4f\t%.4f\n", n.Name, n.Region, len(n.Servers), n.Location.Lat, n.Location.Lon)
			}
		}
	case "servers":
		type row struct {
			Node            string `json:"node" yaml:"node"`
			Region          string `json:"region" yaml:"region"`
			topology.Server `yaml:",inline"`
		}
		var rs []row
		for _, n := range t.Nodes {
			for _, s := range n.Servers {
				rs = append(rs, row{n.Name, n.Region, s})
			}
		}
		rows = rs
		table = func(w *tabwriter.Writer) {
			fmt.Fprintln(w, "NAME\tNODE\tREGION\tADDRESS\tWEIGHT\tBANDWIDTH_MBPS")
			for _, r := range rs {
				weight := r.Weight
				if weight == 0 {
					weight = topology.DefaultWeight
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%g\n", r.Name, r.Node, r.Region, r.Address, weight, r.Capacity.BandwidthMbps)
			}
		}
	case "zones":
		rows = t.Zones
		table = func(w *tabwriter.Writer) {
			fmt.Fprintln(w, "NAME\tREGION\tNETWORKS")
			for _, z := range t.Zones {
				nets := strings.Join(z.Networks, ",")
				if len(z.Networks) > 4 {
					nets = fmt.Sprintf("%s,... (%d)", strings.Join(z.Networks[:4], ","), len(z.Networks))
				}
				fmt.Fprintf(w, "%s\t%s\t%s\n", z.Name, z.Region, nets)
			}
		}
	case "services":
		rows = t.Services
		table = func(w *tabwriter.Writer) {
			fmt.Fprintln(w, "NAME\tHOSTNAMES\tSELECTION\tBITRATES_KBPS")
			for _, s := range t.Services {
				sel := s.Selection
				if sel == "" {
					sel = topology.DefaultSelection
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", s.Name, strings.Join(s.Hostnames, ","), sel, strings.Trim(fmt.Sprint(s.BitratesKbps), "[]"))
			}
		}
	default:
		return fmt.Errorf("%w: cannot get %q: want topology, regions, nodes, servers, zones or services", ErrUsage, what)
	}
	return render(out, *format, rows, table, fmt.Sprintf("revision %d", resp.GetRevision()))
}

func render(out io.Writer, format string, rows any, table func(*tabwriter.Writer), footer string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	case "yaml":
		enc := yaml.NewEncoder(out)
		enc.SetIndent(2)
		defer enc.Close()
		return enc.Encode(rows)
	case "table":
		if table == nil {
			return fmt.Errorf("%w: no table form; use -o yaml or -o json", ErrUsage)
		}
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		table(w)
		if err := w.Flush(); err != nil {
			return err
		}
		if footer != "" {
			fmt.Fprintln(out, footer)
		}
		return nil
	default:
		return fmt.Errorf("%w: unknown output format %q (table, yaml, json)", ErrUsage, format)
	}
}

func statusCmd(ctx context.Context, c pb.AdminClient, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	format := outputFlag(fs)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	resp, err := c.Status(ctx, &pb.StatusRequest{})
	if err != nil {
		return explain(err)
	}
	type qoe struct {
		Sessions  int64   `json:"sessions" yaml:"sessions"`
		Planned   int64   `json:"planned" yaml:"planned"`
		Fallback  int64   `json:"fallback" yaml:"fallback"`
		Objective float64 `json:"objective" yaml:"objective"`
		Gap       float64 `json:"gap" yaml:"gap"`
		AgeS      float64 `json:"age_seconds" yaml:"age_seconds"`
		Peers     int32   `json:"peers" yaml:"peers"`
	}
	type inst struct {
		ID               string  `json:"id" yaml:"id"`
		Role             string  `json:"role" yaml:"role"`
		Region           string  `json:"region,omitempty" yaml:"region,omitempty"`
		State            string  `json:"state" yaml:"state"`
		SnapshotRevision int64   `json:"snapshot_revision" yaml:"snapshot_revision"`
		SnapshotAge      float64 `json:"snapshot_age_seconds" yaml:"snapshot_age_seconds"`
		Version          string  `json:"version" yaml:"version"`
		Uptime           string  `json:"uptime" yaml:"uptime"`
		Admin            string  `json:"admin_address,omitempty" yaml:"admin_address,omitempty"`
		Announced        bool    `json:"announced" yaml:"announced"`
		AnnounceReason   string  `json:"announce_reason,omitempty" yaml:"announce_reason,omitempty"`
		Announces        string  `json:"announces,omitempty" yaml:"announces,omitempty"`
		Peers            string  `json:"bgp_peers,omitempty" yaml:"bgp_peers,omitempty"`
		QoE              *qoe    `json:"qoe,omitempty" yaml:"qoe,omitempty"`
	}
	type region struct {
		Region     string `json:"region" yaml:"region"`
		Servers    int32  `json:"servers" yaml:"servers"`
		Healthy    int32  `json:"healthy" yaml:"healthy"`
		Unhealthy  int32  `json:"unhealthy" yaml:"unhealthy"`
		Drained    int32  `json:"drained" yaml:"drained"`
		Available  int32  `json:"available" yaml:"available"`
		PanicNodes int32  `json:"panic_nodes" yaml:"panic_nodes"`
	}
	type checker struct {
		ID      string `json:"id" yaml:"id"`
		Region  string `json:"region" yaml:"region"`
		Targets int32  `json:"targets" yaml:"targets"`
		Uptime  string `json:"uptime" yaml:"uptime"`
	}
	type drain struct {
		Kind   string `json:"kind" yaml:"kind"`
		Name   string `json:"name" yaml:"name"`
		Reason string `json:"reason,omitempty" yaml:"reason,omitempty"`
		Since  string `json:"since" yaml:"since"`
	}
	// What each center answered, by the STBs' region: which cities' STBs
	// the centers are serving now (a city failed over, or in no zone).
	type answers struct {
		Center   string  `json:"center" yaml:"center"`
		Region   string  `json:"stb_region" yaml:"stb_region"`
		Answered uint64  `json:"answered" yaml:"answered"`
		Failed   uint64  `json:"failed" yaml:"failed"`
		LastAgo  float64 `json:"last_answer_seconds_ago" yaml:"last_answer_seconds_ago"`
	}
	type doc struct {
		Revision  int64     `json:"revision" yaml:"revision"`
		Instances []inst    `json:"instances" yaml:"instances"`
		Regions   []region  `json:"regions" yaml:"regions"`
		Checkers  []checker `json:"checkers" yaml:"checkers"`
		Drains    []drain   `json:"drains" yaml:"drains"`
		Center    []answers `json:"center_answers" yaml:"center_answers"`
	}
	d := doc{Revision: resp.GetRevision(), Instances: []inst{}, Regions: []region{}, Checkers: []checker{}, Drains: []drain{}, Center: []answers{}}
	byCenter := centersTraffic(resp)
	for _, id := range slices.Sorted(maps.Keys(byCenter)) {
		for _, t := range byCenter[id] {
			d.Center = append(d.Center, answers{id, t.GetClientRegion(), t.GetAnswered(), t.GetFailed(), time.Since(t.GetLast().AsTime()).Seconds()})
		}
	}
	for _, r := range resp.GetRegions() {
		d.Regions = append(d.Regions, region{r.GetRegion(), r.GetServers(), r.GetHealthy(), r.GetUnhealthy(), r.GetDrained(), r.GetAvailable(), r.GetPanicNodes()})
	}
	for _, c := range resp.GetCheckers() {
		d.Checkers = append(d.Checkers, checker{c.GetId(), c.GetRegion(), c.GetTargets(), time.Since(c.GetStartedAt().AsTime()).Round(time.Second).String()})
	}
	for _, dr := range resp.GetDrains() {
		d.Drains = append(d.Drains, drain{dr.GetKind(), dr.GetName(), dr.GetReason(), dr.GetAt().AsTime().Format(time.RFC3339)})
	}
	for _, in := range resp.GetInstances() {
		d.Instances = append(d.Instances, inst{
			ID: in.GetId(), Role: in.GetRole(), Region: in.GetRegion(), State: in.GetState(),
			SnapshotRevision: in.GetSnapshotRevision(), SnapshotAge: in.GetSnapshotAgeSeconds(),
			Version: in.GetVersion(), Uptime: time.Since(in.GetStartedAt().AsTime()).Round(time.Second).String(),
			Admin: in.GetAdminAddress(), Announced: in.GetAnnounced(), AnnounceReason: in.GetAnnounceReason(), Announces: in.GetAnnounces(),
			Peers: peerList(in.GetBgpPeers()),
		})
		if q := in.GetQoe(); q != nil {
			d.Instances[len(d.Instances)-1].QoE = &qoe{q.GetSessions(), q.GetPlanned(), q.GetFallback(), q.GetObjective(), q.GetGap(), q.GetAgeSeconds(), q.GetPeers()}
		}
	}
	return render(out, *format, d, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "topology revision %d, %d scheduler instance(s)\n", d.Revision, len(d.Instances))
		fmt.Fprintln(w, "INSTANCE\tROLE\tREGION\tSTATE\tREVISION\tSNAPSHOT_AGE\tROUTE\tBGP\tUPTIME\tVERSION")
		for _, in := range d.Instances {
			region := in.Region
			if region == "" {
				region = "-"
			}
			lag := ""
			if in.SnapshotRevision != d.Revision {
				lag = " (behind)"
			}
			route := "-"
			switch {
			case in.Announced:
				route = in.Announces + " announced"
			case in.AnnounceReason != "" && in.AnnounceReason != "announce.mode none":
				route = "withdrawn: " + in.AnnounceReason
			}
			peers := in.Peers
			if peers == "" {
				peers = "-"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d%s\t%.1fs\t%s\t%s\t%s\t%s\n", in.ID, in.Role, region, in.State, in.SnapshotRevision, lag, in.SnapshotAge, route, peers, in.Uptime, in.Version)
		}
		var plans []inst
		for _, in := range d.Instances {
			if in.QoE != nil {
				plans = append(plans, in)
			}
		}
		if len(plans) > 0 {
			fmt.Fprintln(w, "\nQOE PLAN\tREGION\tSESSIONS\tPLANNED\tFALLBACK\tOBJECTIVE\tGAP\tAGE\tPEERS")
			for _, in := range plans {
				q := in.QoE
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%.1f\t%.2f%%\t%.1fs\t%d\n", in.ID, in.Region, q.Sessions, q.Planned, q.Fallback, q.Objective, 100*q.Gap, q.AgeS, q.Peers)
			}
		}
		if len(d.Regions) > 0 {
			checkersOf := map[string]int{}
			for _, c := range d.Checkers {
				checkersOf[c.Region]++
			}
			fmt.Fprintln(w, "\nREGION\tSERVERS\tHEALTHY\tUNHEALTHY\tDRAINED\tAVAILABLE\tPANIC_NODES\tCHECKERS")
			for _, r := range d.Regions {
				fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", r.Region, r.Servers, r.Healthy, r.Unhealthy, r.Drained, r.Available, r.PanicNodes, checkersOf[r.Region])
			}
		}
		if len(d.Checkers) > 0 {
			fmt.Fprintln(w, "\nCHECKER\tREGION\tTARGETS\tUPTIME")
			for _, c := range d.Checkers {
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", c.ID, c.Region, c.Targets, c.Uptime)
			}
		}
		if len(d.Center) > 0 {
			fmt.Fprintln(w, "\nCENTER\tSTB_REGION\tANSWERED\tFAILED\tLAST_ANSWER")
			for _, a := range d.Center {
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s ago\n", a.Center, a.Region, a.Answered, a.Failed, time.Duration(a.LastAgo*float64(time.Second)).Round(100*time.Millisecond))
			}
		}
		if len(d.Drains) > 0 {
			fmt.Fprintln(w, "\nDRAINED\tNAME\tREASON\tSINCE")
			for _, dr := range d.Drains {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", dr.Kind, dr.Name, dr.Reason, dr.Since)
			}
		}
	}, "")
}

func versionString() string { return version.String() }

func explainCmd(ctx context.Context, c pb.AdminClient, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	client := fs.String("client-ip", "", "the STB's address")
	host := fs.String("host", "", "the hostname the STB asked for")
	path := fs.String("path", "/", "the request path (and query)")
	region := fs.String("region", "", "explain as this region's scheduler (default: as the center)")
	format := outputFlag(fs)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if *client == "" || *host == "" {
		return fmt.Errorf("%w: explain needs --client-ip and --host", ErrUsage)
	}
	resp, err := c.Explain(ctx, &pb.ExplainRequest{ClientIp: *client, Host: *host, Path: *path, Region: *region})
	if err != nil {
		return explain(err)
	}
	switch *format {
	case "json":
		b, err := protojson.MarshalOptions{Multiline: true, UseProtoNames: true, EmitUnpopulated: true}.Marshal(resp)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(out, string(b))
		return err
	case "table":
	default:
		return fmt.Errorf("%w: explain output is table or json", ErrUsage)
	}
	fmt.Fprintf(out, "revision %d: %s", resp.GetRevision(), resp.GetResult())
	if resp.GetServer() != "" {
		fmt.Fprintf(out, " -> %s (%s) at %d kbps\n  %s\n", resp.GetServer(), resp.GetAddress(), resp.GetBitrateKbps(), resp.GetLocation())
	} else {
		fmt.Fprintf(out, ": %s\n", resp.GetReason())
	}
	for _, st := range resp.GetSteps() {
		fmt.Fprintf(out, "  - %s\n", st)
	}
	if len(resp.GetCandidates()) == 0 {
		return nil
	}
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SERVER\tNODE\tREGION\tADDRESS\tKM\tWEIGHT\tAVAILABLE\tWHY")
	for _, cd := range resp.GetCandidates() {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%.1f\t%d\t%t\t%s\n", cd.GetServer(), cd.GetNode(), cd.GetRegion(), cd.GetAddress(), cd.GetDistanceKm(), cd.GetWeight(), cd.GetAvailable(), cd.GetWhy())
	}
	return w.Flush()
}

func drainArgs(cmd string, args []string) (kind, name string, rest []string, err error) {
	if len(args) < 2 || strings.HasPrefix(args[0], "-") || strings.HasPrefix(args[1], "-") {
		return "", "", nil, fmt.Errorf("%w: %s server|node|region NAME", ErrUsage, cmd)
	}
	return args[0], args[1], args[2:], nil
}

func drainCmd(ctx context.Context, c pb.AdminClient, args []string, out io.Writer) error {
	kind, name, rest, err := drainArgs("drain", args)
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("drain", flag.ContinueOnError)
	reason := fs.String("reason", "", "why, shown by status and explain")
	if err := fs.Parse(rest); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	resp, err := c.Drain(ctx, &pb.DrainRequest{Kind: kind, Name: name, Reason: *reason})
	if err != nil {
		return explain(err)
	}
	if resp.GetChanged() {
		fmt.Fprintf(out, "drained %s %s (%d servers): no new STBs go there\n", kind, name, resp.GetServers())
	} else {
		fmt.Fprintf(out, "%s %s was already drained\n", kind, name)
	}
	return nil
}

func undrainCmd(ctx context.Context, c pb.AdminClient, args []string, out io.Writer) error {
	kind, name, rest, err := drainArgs("undrain", args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("%w: unexpected arguments %v", ErrUsage, rest)
	}
	resp, err := c.Undrain(ctx, &pb.UndrainRequest{Kind: kind, Name: name})
	if err != nil {
		return explain(err)
	}
	if resp.GetChanged() {
		fmt.Fprintf(out, "undrained %s %s (%d servers)\n", kind, name, resp.GetServers())
	} else {
		fmt.Fprintf(out, "%s %s was not drained\n", kind, name)
	}
	return nil
}

func peerList(ps []*pb.BGPPeer) string {
	var parts []string
	for _, p := range ps {
		parts = append(parts, fmt.Sprintf("%s(AS%d)=%s", p.GetAddress(), p.GetAsn(), p.GetState()))
	}
	return strings.Join(parts, " ")
}

func drillCmd(ctx context.Context, c pb.AdminClient, args []string, out io.Writer) error {
	if len(args) > 0 && args[0] == "etcd-loss" {
		return etcdLossCmd(ctx, c, args[1:], out)
	}
	if len(args) == 0 || args[0] != "failover" {
		return fmt.Errorf("%w: drill failover --region R --duration D, or drill etcd-loss --duration D [--members N] [--leader]", ErrUsage)
	}
	fs := flag.NewFlagSet("drill failover", flag.ContinueOnError)
	region := fs.String("region", "", "the region whose schedulers withdraw (\"center\" for the center)")
	dur := fs.Duration("duration", 30*time.Second, "how long the route stays withdrawn")
	prod := fs.Bool("i-know-this-is-production", false, "run the drill on a province that is not a lab")
	noWatch := fs.Bool("no-watch", false, "start the drill and return")
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if *region == "" {
		return fmt.Errorf("%w: drill failover needs --region", ErrUsage)
	}
	var base map[string]*pb.RegionTraffic // the centers' answers to the city's STBs so far
	if st, err := c.Status(ctx, &pb.StatusRequest{}); err == nil {
		base = centerTraffic(st, *region)
	}
	start := time.Now()
	resp, err := c.Drill(ctx, &pb.DrillRequest{Region: *region, DurationSeconds: dur.Seconds(), ProductionConfirmed: *prod})
	if err != nil {
		return explain(err)
	}
	fmt.Fprintf(out, "drill: %s's schedulers %v withdraw their route until %s\n", *region, resp.GetInstances(), resp.GetUntil().AsTime().Local().Format(time.TimeOnly))
	if *noWatch || len(resp.GetInstances()) == 0 {
		return nil
	}
	// Follow the instances' route state until every one of them announces
	// again, and the center's answers to the city's STBs until they stop.
	withdrawn, back := map[string]time.Duration{}, map[string]time.Duration{}
	deadline := resp.GetUntil().AsTime().Add(60 * time.Second)
	follow := &takeover{region: *region, start: start, base: base, out: out}
	var allBack time.Time
	for time.Now().Before(deadline) && (len(back) < len(resp.GetInstances()) || !follow.settled(allBack)) {
		st, err := c.Status(ctx, &pb.StatusRequest{})
		if err == nil && *region != "center" {
			follow.observe(st)
		}
		if err == nil {
			for _, in := range st.GetInstances() {
				if !slices.Contains(resp.GetInstances(), in.GetId()) || in.GetUpdatedAt().AsTime().Before(start) {
					continue // not in the drill, or a record from before it started
				}
				id := in.GetId()
				if _, ok := withdrawn[id]; !ok && !in.GetAnnounced() {
					withdrawn[id] = time.Since(start)
					fmt.Fprintf(out, "  +%5.1fs  %s withdrew its route (%s)\n", withdrawn[id].Seconds(), id, in.GetAnnounceReason())
				}
				if _, ok := withdrawn[id]; ok && back[id] == 0 && in.GetAnnounced() {
					back[id] = time.Since(start)
					fmt.Fprintf(out, "  +%5.1fs  %s announces again\n", back[id].Seconds(), id)
				}
			}
			if allBack.IsZero() && len(back) == len(resp.GetInstances()) {
				allBack = time.Now()
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	if len(back) < len(resp.GetInstances()) {
		return fmt.Errorf("drill: not every instance announced again within 60 s of the drill's end: %v", back)
	}
	if *region == "center" {
		fmt.Fprintf(out, "drill done: the center announces again (status is polled every 250 ms; STB-side figures: the load generator)\n")
		return nil
	}
	follow.summary()
	return nil
}

// takeover follows, through Status, the central schedulers' answers to the
// STBs of a drilled city: when a center took them over, when the last one
// gave them back, and how many they answered (with an error or not). The
// center schedctl talks to counts live, the others as of their last
// registration (every 2 s). Only answers are seen: a request lost in flight
// while routes change is seen by the STB alone.
type takeover struct {
	region   string
	start    time.Time
	base     map[string]*pb.RegionTraffic // by center, at the start
	out      io.Writer
	cur      map[string]*pb.RegionTraffic // by center, the centers that answered the city since
	tookOver time.Time
	lastSeen time.Time // when a center's last answer last moved
}

// takeoverQuiet: the city is back when no center has answered its STBs for
// this long (more than the 2 s between two registrations).
const takeoverQuiet = 2500 * time.Millisecond

func trafficOf(ts []*pb.RegionTraffic, region string) *pb.RegionTraffic {
	for _, t := range ts {
		if t.GetClientRegion() == region {
			return t
		}
	}
	return nil
}

// centersTraffic is every central scheduler's answers by the STBs'
// region: the one answering the call live, the others from their records.
func centersTraffic(st *pb.StatusResponse) map[string][]*pb.RegionTraffic {
	out := map[string][]*pb.RegionTraffic{}
	for _, in := range st.GetInstances() {
		if in.GetRole() == "central" {
			out[in.GetId()] = in.GetTraffic()
		}
	}
	if id := st.GetCenterId(); id != "" {
		out[id] = st.GetCenterTraffic() // live beats the record
	}
	return out
}

// centerTraffic is every central scheduler's count for region.
func centerTraffic(st *pb.StatusResponse, region string) map[string]*pb.RegionTraffic {
	out := map[string]*pb.RegionTraffic{}
	for id, ts := range centersTraffic(st) {
		if t := trafficOf(ts, region); t != nil {
			out[id] = t
		}
	}
	return out
}

func (f *takeover) observe(st *pb.StatusResponse) {
	if f.cur == nil {
		f.cur = map[string]*pb.RegionTraffic{}
	}
	for id, t := range centerTraffic(st, f.region) {
		if t.GetAnswered() <= f.base[id].GetAnswered() {
			continue
		}
		if old := f.cur[id]; old == nil || !old.GetLast().AsTime().Equal(t.GetLast().AsTime()) {
			f.lastSeen = time.Now()
		}
		f.cur[id] = t
		took := t.GetRunStart().AsTime()
		if took.Before(f.start) { // it was answering the city already
			took = f.start
		}
		if f.tookOver.IsZero() {
			fmt.Fprintf(f.out, "  +%5.1fs  the center (%s) answered its first %s STB: it took the city over\n", took.Sub(f.start).Seconds(), id, f.region)
		}
		if f.tookOver.IsZero() || took.Before(f.tookOver) {
			f.tookOver = took
		}
	}
}

// settled: the city announces again (since back) and no center has
// answered its STBs for takeoverQuiet; or nothing came for 15 s.
func (f *takeover) settled(back time.Time) bool {
	if back.IsZero() {
		return false
	}
	if len(f.cur) == 0 {
		return time.Since(back) > takeoverQuiet
	}
	return time.Since(f.lastSeen) > takeoverQuiet || time.Since(back) > 15*time.Second
}

func (f *takeover) summary() {
	if len(f.cur) == 0 {
		fmt.Fprintf(f.out, "drill done: no center answered any request of %s's STBs: there was no traffic from the city\n", f.region)
		return
	}
	var answered, failed uint64
	var last time.Time
	var each []string
	ids := slices.Sorted(maps.Keys(f.cur))
	for _, id := range ids {
		t, b := f.cur[id], f.base[id]
		n := t.GetAnswered() - b.GetAnswered()
		answered, failed = answered+n, failed+t.GetFailed()-b.GetFailed()
		if l := t.GetLast().AsTime(); l.After(last) {
			last = l
		}
		each = append(each, fmt.Sprintf("%s %d", id, n))
	}
	who := "the center (" + ids[0] + ")"
	if len(each) > 1 {
		who = "the centers (" + strings.Join(each, ", ") + ")"
	}
	fmt.Fprintf(f.out, "  +%5.1fs  the last answer of a center to a %s STB: the city took its traffic back\n", last.Sub(f.start).Seconds(), f.region)
	fmt.Fprintf(f.out, "drill done: %s answered %d requests of %s's STBs from +%.1fs to +%.1fs, %d of them with an error; requests lost in flight while routes changed are seen only by the STBs (bin/lab load counts them)\n",
		who, answered, f.region, f.tookOver.Sub(f.start).Seconds(), last.Sub(f.start).Seconds(), failed)
}

// etcdLossCmd stops the lab's etcd (the center's embedded one, or members of
// the lab's cluster) for a while and follows the drill: whether the store
// answers (a quorum), whether the center keeps deciding from its snapshot
// meanwhile, and whether every scheduler came through without a restart.
func etcdLossCmd(ctx context.Context, c pb.AdminClient, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("drill etcd-loss", flag.ContinueOnError)
	dur := fs.Duration("duration", 10*time.Second, "how long the members stay down")
	members := fs.Uint("members", 0, "how many members of the lab's etcd cluster to stop (0: all)")
	leader := fs.Bool("leader", false, "stop the cluster's current leader first (then the next members, up to --members)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	start := time.Now()
	resp, err := c.DrillEtcdLoss(ctx, &pb.DrillEtcdLossRequest{DurationSeconds: dur.Seconds(), Members: uint32(*members), LeaderFirst: *leader})
	if err != nil {
		return explain(err)
	}
	until := resp.GetUntil().AsTime()
	stopped, total := resp.GetEtcdMembersStopped(), resp.GetEtcdMembers()
	quorum := "quorum lost: the store refuses reads and writes, schedulers answer from their snapshots"
	if resp.GetQuorumKept() {
		quorum = fmt.Sprintf("quorum kept (%d of %d run): the store keeps serving", int(total)-len(stopped), total)
	}
	names := strings.Join(stopped, " ")
	if slices.Contains(stopped, resp.GetEtcdLeader()) && total > 1 {
		names += "; " + resp.GetEtcdLeader() + " was the leader"
	}
	fmt.Fprintf(out, "drill: stopped %d of %d etcd members (%s) until %s; %s\n", len(stopped), total, names, until.Local().Format(time.TimeOnly), quorum)

	// Every 250 ms until the members are due back, a decision of the
	// center's (explain: answered from memory only, never from the store).
	var probes, answered int
	var revision int64
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		for time.Now().Before(until) && ctx.Err() == nil {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			x, err := c.Explain(pctx, &pb.ExplainRequest{ClientIp: "192.0.2.1", Host: "etcd-loss-drill.invalid"})
			cancel()
			probes++
			if err == nil {
				answered++
				revision = x.GetRevision()
			}
			time.Sleep(250 * time.Millisecond)
		}
	}()
	// Every 250 ms: a linearizable read through the store (status).
	var (
		down            bool
		downAt, downFor time.Duration
		outages         int
		dueBack         bool
	)
	deadline := until.Add(2 * time.Minute)
	for {
		if time.Now().After(deadline) {
			return errors.New("drill: the store did not come back within 2 minutes of the drill's end")
		}
		asked := time.Since(start)
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := c.Status(pctx, &pb.StatusRequest{})
		cancel()
		if !dueBack && time.Now().After(until) {
			dueBack = true
			fmt.Fprintf(out, "  +%5.1fs  members due back (each restarts by itself)\n", until.Sub(start).Seconds())
		}
		switch {
		case err != nil && !down:
			down, downAt = true, asked // the read that failed was asked then
			outages++
			fmt.Fprintf(out, "  +%5.1fs  store unreachable (status: %s)\n", downAt.Seconds(), status.Code(err))
		case err == nil && down:
			down = false
			downFor += time.Since(start) - downAt
			fmt.Fprintf(out, "  +%5.1fs  store back\n", time.Since(start).Seconds())
		}
		if dueBack && !down && time.Now().After(until.Add(time.Second)) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}

	<-probed
	// The schedulers: none restarted during the drill, and which announce.
	st, err := c.Status(ctx, &pb.StatusRequest{})
	if err != nil {
		return explain(err)
	}
	var restarted, withdrawn []string
	for _, in := range st.GetInstances() {
		if in.GetStartedAt().AsTime().After(start) {
			restarted = append(restarted, in.GetId())
		}
		if !in.GetAnnounced() {
			withdrawn = append(withdrawn, fmt.Sprintf("%s (%s)", in.GetId(), in.GetAnnounceReason()))
		}
	}
	storeLine := "the store answered throughout"
	if outages > 0 {
		storeLine = fmt.Sprintf("the store was unreachable for %.1fs in %d outage(s)", downFor.Seconds(), outages)
	}
	fmt.Fprintf(out, "  %s; the center answered %d of %d explain probes from its snapshot (revision %d) while the members were down\n", storeLine, answered, probes, revision)
	schedLine := fmt.Sprintf("  %d schedulers registered, none restarted during the drill", len(st.GetInstances()))
	if len(restarted) > 0 {
		schedLine = fmt.Sprintf("  %d schedulers registered; restarted during the drill: %s", len(st.GetInstances()), strings.Join(restarted, " "))
	}
	if len(withdrawn) > 0 {
		schedLine += "; not announcing: " + strings.Join(withdrawn, ", ")
	} else {
		schedLine += "; all announce their route"
	}
	fmt.Fprintln(out, schedLine)
	if answered < probes || len(restarted) > 0 {
		return errors.New("drill: the schedulers did not all come through the etcd loss (see above)")
	}
	fmt.Fprintf(out, "drill done: %d of %d members stopped for %s, quorum %s; the schedulers kept answering from their snapshots (STB-side figures: the load generator, or bin/lab demo)\n",
		len(stopped), total, dur, map[bool]string{true: "kept", false: "lost"}[resp.GetQuorumKept()])
	return nil
}

// tokenCmd signs a viewer token as the business platform does, for tests
// and for checking a city's auth settings by hand.
func tokenCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(out)
	kid := fs.String("key-id", "", "key id (kid), as in the schedulers' alloc.keys")
	file := fs.String("secret-file", "", "file holding the key's secret (at least 32 bytes)")
	sub := fs.String("sub", "", "viewer id")
	ttl := fs.Duration("ttl", 24*time.Hour, "lifetime (exp = now + ttl)")
	kbps := fs.Float64("desired-kbps", math.NaN(), "desired bitrate (default: the scheduler's default profile)")
	dm := fs.Float64("danmaku-per-hour", math.NaN(), "live comments per hour")
	gift := fs.Float64("gift", math.NaN(), "gift spend")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if *kid == "" || *file == "" || *sub == "" || *ttl <= 0 {
		return fmt.Errorf("%w: token needs --key-id, --secret-file, --sub and a positive --ttl", ErrUsage)
	}
	secret, err := token.ReadSecret(*file)
	if err != nil {
		return err
	}
	tok, err := token.Sign(token.Key{ID: *kid, Secret: secret}, token.Claims{
		Subject: *sub, Expires: time.Now().Add(*ttl), DesiredKbps: *kbps, DanmakuPerHour: *dm, Gift: *gift,
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, tok)
	return nil
}
