package ctl

import (
	"testing"

	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

func TestBalance(t *testing.T) {
	defaults := []byte("panic_threshold: 0\nchash:\n    epsilon: 0.25\n    virtual_nodes: 160\n")
	changed := []byte("panic_threshold: 0\nchash:\n    epsilon: 0.5\n    virtual_nodes: 160\nweights:\n    hefei-1-a: 50\n")
	doc := "chash: {epsilon: 0.5}\nweights: {hefei-1-a: 50}\n"
	none := &pb.BalanceResponse{Effective: defaults}
	stored := &pb.BalanceResponse{Document: []byte(doc), Effective: changed, Revision: 41,
		Weights: []*pb.ServerWeight{{Server: "hefei-1-a", Topology: 100, Effective: 50, Why: "swrr: balance weights override"}}}
	get := call{method: "GetBalance", req: &pb.GetBalanceRequest{}}
	set := func(doc string, dry bool, base int64) call {
		return call{method: "SetBalance", req: &pb.SetBalanceRequest{Document: []byte(doc), DryRun: dry, BaseRevision: base}}
	}
	forced := func(c call) call {
		c.req.(*pb.SetBalanceRequest).Force = true
		return c
	}
	plan := &pb.BalanceResponse{Document: []byte(doc), Effective: changed, Changed: true}
	// The dry run, then the store: what was shown is what is stored.
	setting := map[string]handler{"GetBalance": reply(none), "SetBalance": func(n int, _ proto.Message) (proto.Message, error) {
		if n == 0 {
			return plan, nil
		}
		return &pb.BalanceResponse{Document: []byte(doc), Effective: changed, Changed: true, Revision: 42}, nil
	}}
	change := "effective policy, against the defaults (no document stored):\n  ~ chash.epsilon: 0.25 -> 0.5\n  ~ weights.hefei-1-a: - -> 50\n"
	runCases(t, []cmdCase{
		{
			name: "get, none stored", args: []string{"balance", "get"}, rpc: map[string]handler{"GetBalance": reply(none)},
			want: "stored: none (the defaults apply)\neffective policy:\n  panic_threshold: 0\n  chash:\n      epsilon: 0.25\n      virtual_nodes: 160\nevery server weighs what the topology says\n",
			sent: []call{get},
		},
		{
			name: "get, stored", args: []string{"balance", "get"}, rpc: map[string]handler{"GetBalance": reply(stored)},
			want: "stored at revision 41:\n  chash: {epsilon: 0.5}\n  weights: {hefei-1-a: 50}\neffective policy:\n  panic_threshold: 0\n  chash:\n      epsilon: 0.5\n      virtual_nodes: 160\n  weights:\n      hefei-1-a: 50\n" +
				"servers the center's engine weighs otherwise than the topology\nSERVER     TOPOLOGY  EFFECTIVE  WHY\nhefei-1-a  100       50         swrr: balance weights override\n",
			sent: []call{get},
		},
		{
			name: "get json", args: []string{"balance", "get", "-o", "json"}, rpc: map[string]handler{"GetBalance": reply(stored)},
			want: `{
  "revision": 41,
  "stored": "chash: {epsilon: 0.5}\nweights: {hefei-1-a: 50}\n",
  "effective": {
    "chash": {
      "epsilon": 0.5,
      "virtual_nodes": 160
    },
    "panic_threshold": 0,
    "weights": {
      "hefei-1-a": 50
    }
  },
  "weights": [
    {
      "server": "hefei-1-a",
      "topology": 100,
      "effective": 50,
      "why": "swrr: balance weights override"
    }
  ]
}
`,
			sent: []call{get},
		},
		{
			name: "set, dry run", args: []string{"balance", "set", "-f", "-", "--dry-run"}, stdin: doc, rpc: setting,
			want: change + "valid; nothing stored (--dry-run)\n",
			sent: []call{get, set(doc, true, -1)},
		},
		{
			name: "set", args: []string{"balance", "set", "-f", "-", "--yes"}, stdin: doc, rpc: setting,
			want: change + "stored at revision 42; every scheduler reloads it within a second\n",
			sent: []call{get, set(doc, true, -1), set(doc, false, -1)},
		},
		{
			name: "set, forced past the removal guard", args: []string{"balance", "set", "-f", "-", "--yes", "--force"}, stdin: doc, rpc: setting,
			want: change + "stored at revision 42; every scheduler reloads it within a second\n",
			sent: []call{get, forced(set(doc, true, -1)), forced(set(doc, false, -1))},
		},
		{
			name: "set, refused by the removal guard", args: []string{"balance", "set", "-f", "-", "--yes"}, stdin: doc,
			rpc: map[string]handler{"GetBalance": reply(none), "SetBalance": fail(codes.FailedPrecondition,
				"refused: the balance policy takes 1 server out of service: w; leaves region wuhu with no serving server; check, then balance set with --force as admin")},
			wantErr: "schedctl balance: refused: the balance policy takes 1 server out of service: w; leaves region wuhu with no serving server; check, then balance set with --force as admin",
			sent:    []call{get, set(doc, true, -1)},
		},
		{
			name: "set, guarded by the revision read", args: []string{"balance", "set", "-f", "-", "--yes"}, stdin: doc,
			rpc: map[string]handler{"GetBalance": reply(stored), "SetBalance": func(n int, _ proto.Message) (proto.Message, error) {
				if n == 0 {
					return &pb.BalanceResponse{Document: []byte(doc), Effective: changed, Changed: true, Revision: 41}, nil
				}
				return fail(codes.FailedPrecondition, "the balance policy was read at revision 41 but the stored one is at revision 43: someone changed it meanwhile; read it again (schedctl balance get)")(n, nil)
			}},
			want:    "effective policy: no change against the stored document\n",
			wantErr: "schedctl balance: the balance policy was read at revision 41 but the stored one is at revision 43: someone changed it meanwhile; read it again (schedctl balance get)",
			sent:    []call{get, set(doc, true, 41), set(doc, false, 41)},
		},
		{
			name: "set, unchanged", args: []string{"balance", "set", "-f", "-", "--yes"}, stdin: doc,
			rpc:  map[string]handler{"GetBalance": reply(stored), "SetBalance": reply(&pb.BalanceResponse{Document: []byte(doc), Effective: changed, Revision: 41})},
			want: "effective policy: no change against the stored document\nunchanged: the center already holds this document\n",
			sent: []call{get, set(doc, true, 41)},
		},
		{
			name: "set, no terminal", args: []string{"balance", "set", "-f", "-"}, stdin: doc, rpc: setting,
			want:    change,
			wantErr: "schedctl balance: not applied: no terminal to confirm on; check the diff above and pass --yes",
			sent:    []call{get, set(doc, true, -1)},
		},
		{
			name: "set, rejected", args: []string{"balance", "set", "-f", "-"}, stdin: "chash: {epsilon: -1}\n",
			rpc:     map[string]handler{"GetBalance": reply(none), "SetBalance": badRequest("balance policy rejected: 1 problem(s), nothing was stored", "chash.epsilon", "-1 must be a finite number >= 0")},
			wantErr: "schedctl balance: balance policy rejected: 1 problem(s), nothing was stored\n  chash.epsilon: -1 must be a finite number >= 0",
			sent:    []call{get, set("chash: {epsilon: -1}\n", true, -1)},
		},
		{
			name: "reset", args: []string{"balance", "reset", "--yes"},
			rpc: map[string]handler{"GetBalance": reply(stored), "SetBalance": reply(&pb.BalanceResponse{Effective: defaults, Changed: true, Revision: 41})},
			want: "effective policy, against the stored document:\n  ~ chash.epsilon: 0.5 -> 0.25\n  ~ weights.hefei-1-a: 50 -> -\n" +
				"reset: no document stored, the defaults apply; every scheduler reloads within a second\n",
			sent: []call{get, set("", true, 41), set("", false, 41)},
		},
		// Mistakes found before any RPC.
		{name: "nothing", args: []string{"balance"}, wantErr: "schedctl balance: balance what? get, set or reset", usage: true},
		{name: "unknown", args: []string{"balance", "put"}, wantErr: `schedctl balance: unknown balance command "put": want get, set or reset`, usage: true},
		{name: "no file", args: []string{"balance", "set"}, wantErr: "schedctl balance: missing -f FILE", usage: true},
		{name: "reset takes no file", args: []string{"balance", "reset", "-f", "x"}, wantErr: "schedctl balance: flag provided but not defined: -f", usage: true},
	})
}
