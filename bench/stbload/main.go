// Command stbload sends simulated set-top-box requests to schedulers and
// prints what the boxes saw, per city. On loopback there is no Anycast
// routing, so --route says which scheduler each city's boxes reach (the rest
// reach --default, the center), as routers' longest-prefix match would.
//
//	go run ./bench/stbload --topology deploy/examples/topology.yaml \
//	  --cities hefei,wuhu,huainan --route hefei=127.0.0.1:18081,wuhu=127.0.0.1:18082 \
//	  --default 127.0.0.1:18080 --requests 3000
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/token"
	"github.com/anysched/anysched/internal/testbed/stbload"
)

func main() {
	if err := run(); err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, "stbload: ") { // the stbload package's errors name it already
			msg = "stbload: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
}

func run() error {
	topo := flag.String("topology", "deploy/examples/topology.yaml", "topology file (client networks per city)")
	cities := flag.String("cities", "", "comma-separated cities whose STBs send requests (default: every region)")
	routes := flag.String("route", "", "city=host:port,... the scheduler each city's STBs reach")
	def := flag.String("default", "127.0.0.1:18080", "scheduler reached by cities without a route (the center)")
	host := flag.String("host", "live.iptv.example", "service hostname")
	requests := flag.Int("requests", 3000, "total requests (bounded)")
	conc := flag.Int("concurrency", 16, "concurrent STBs")
	maxDur := flag.Duration("max-duration", time.Minute, "stop after this long regardless")
	seed := flag.Uint64("seed", 1, "random seed")
	pause := flag.Duration("pause", 0, "each STB waits this long between requests")
	quietProgress := flag.Bool("quiet", false, "no progress lines")
	perSecond := flag.Bool("per-second", false, "a line per city and second: sec=N city=C requests=N failed=N by=instance:N,... (instead of progress lines)")
	follow := flag.Bool("follow", false, "after the redirect, fetch the playlist and two segments from the edge")
	viewers := flag.Int("viewers", 0, "fixed STBs per city, each at its own address (returning sessions); 0: every request is a new STB")
	keyID := flag.String("token-key-id", "", "sign a viewer token for every STB with this key id (needs --viewers and --token-secret-file)")
	keyFile := flag.String("token-secret-file", "", "file with the token key's secret")
	family := flag.String("family", "", "ipv4 or ipv6: only the cities' client networks of that family (the STBs of one family of a dual-stack province; --default and --route then name schedulers of that family, [addr]:port for IPv6)")
	flag.Parse()

	data, err := os.ReadFile(*topo)
	if err != nil {
		return err
	}
	t, err := topology.Parse(data)
	if err != nil {
		return err
	}
	var names []string
	if *cities == "" {
		for _, r := range t.Regions {
			names = append(names, r.Name)
		}
	} else {
		names = strings.Split(*cities, ",")
	}
	route := map[string]string{}
	if *routes != "" {
		for _, kv := range strings.Split(*routes, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return fmt.Errorf("--route: %q is not city=host:port", kv)
			}
			route[k] = v
		}
	}
	cs, err := stbload.CitiesFromTopology(t, names, route, *def)
	if err != nil {
		return err
	}
	switch *family {
	case "":
	case "ipv4", "ipv6":
		if cs, err = stbload.OnlyFamily(cs, *family == "ipv6"); err != nil {
			return err
		}
	default:
		return fmt.Errorf("--family %q: want ipv4 or ipv6", *family)
	}
	fmt.Printf("%d STB requests from %d cities, %d at a time:\n", *requests, len(cs), *conc)
	for _, c := range cs {
		fmt.Printf("  %-10s -> %s (%d client networks)\n", c.Name, c.Scheduler, len(c.Networks))
	}
	var tokens func(string, int) string
	if *keyID != "" || *keyFile != "" {
		if *keyID == "" || *keyFile == "" || *viewers <= 0 {
			return fmt.Errorf("--token-key-id, --token-secret-file and --viewers go together")
		}
		secret, err := token.ReadSecret(*keyFile)
		if err != nil {
			return err
		}
		tokens = stbload.Tokens(token.Key{ID: *keyID, Secret: secret}, 24*time.Hour, *seed)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var progress io.Writer = os.Stdout
	if *quietProgress || *perSecond {
		progress = nil
	}
	var each func(stbload.Second)
	if *perSecond {
		each = func(s stbload.Second) { fmt.Println(s.Line()) }
	}
	rep, err := stbload.Run(ctx, stbload.Options{
		Cities: cs, Host: *host, Requests: *requests, Concurrency: *conc, MaxDuration: *maxDur,
		Channels: 200, Progress: progress, PerSecond: each, Seed: *seed, Pause: *pause, Follow: *follow,
		Viewers: *viewers, Token: tokens,
	})
	if err != nil {
		return err
	}
	fmt.Println()
	return rep.WriteTable(os.Stdout)
}
