// Package balance chooses a server inside an edge node (after the Go
// edge load-balancing write-up), and ranks nodes before that choice. It is pure: no
// I/O, no package-level mutable state, no goroutines; steer calls it.
//
// # Policies
//
// A service's topology selection picks the policy its STBs get:
//
//   - nearest (NewNearest): weighted rendezvous hashing of the client, so one
//     STB keeps its server (the engine's behaviour before this package).
//   - swrr (NewSWRR): nginx's smooth weighted round robin, exactly (5,1,1 ->
//     a a b a c a a), with nginx's failure penalty and per-pick recovery,
//     Envoy's slow start, and QoS-adaptive weights (AdaptiveWeights).
//   - chash (NewCHash): consistent hashing of the content key (ContentKey /
//     ContentHash: channel or path, whitelisted query parameters only) on a
//     ring of virtual nodes, with bounded loads: a cold channel stays on
//     its ring owner, a hot one is replicated over as few servers as keep
//     every server within (1+epsilon) x its share (chash_bounded.go).
//   - p2c (NewP2C): power of two choices on a CPU / bandwidth / connections
//     score, with local pick counts bridging the gap between health reports.
//   - qoe is internal/allocation/allocator's (model in internal/allocation/qoe); a Table serves nearest for STBs its plan does
//     not cover.
//
// RankNodes orders a region's nodes by distance or by the RTT + loss
// distance, skipping nodes below the panic threshold or over capacity.
//
// # Tables and hot reload
//
// Policies are immutable apart from their per-pick state. BuildTable builds
// every node's policy for the selections in use, off the hot path;
// steer.Build puts the table in the routing engine, which the scheduler
// publishes through an atomic.Pointer, so a request sees the old table or
// the new one, never half of one. A Table is rebuilt on every
// topology change, health change and configuration change (Config, decoded
// by ParseConfig from the document in etcd): the rebuild inherits swrr's
// sequence position and failure penalties, chash's recent loads and keys'
// demand (shared outright while a node's servers stay) and the adaptive
// weights' smoothing by server name, and reuses a chash ring whose servers
// and weights did not change. While servers slow-start, keep
// rebuilding (once a second is plenty) until Table.RampingUntil.
//
// How steer uses a table (steer.Build and Engine.Decide):
//
//	t, err := balance.BuildTable(balance.TableInput{Nodes: ..., Use: ..., Config: cfg}, prev) // on every change
//	key := balance.ContentHash(path, rawQuery, t.Config().Key)                            // per request
//	server := t.Pick(sel, node, key, clientHash)                                          // -1: no server
//
// # Concurrency, and what it costs
//
// Every Pick is safe for any number of goroutines and allocates nothing.
// Per-pick state, policy by policy:
//
//   - swrr: one sync.Mutex per node around one pass of nginx's loop (the
//     algorithm is a sequential recurrence; a lock-free version would have to
//     precompute the whole period, sum of weights long, and could not follow
//     failures pick by pick). The critical section is the pick itself.
//   - chash: lock-free. The ring is immutable; bounded, the recent
//     requests of each server (on its own 128-byte line) and of each key
//     (a table of 1,024 to 16,384 words) are atomic words that carry their
//     own decay, so nothing sweeps them: a pick compare-and-swaps its key's
//     word and its server's. The node's total is re-added from the servers
//     once a tick (a 64th of the half-life) rather than written by every
//     pick. The decay clock is coarse: Pick is not given the time, so the
//     tick is one atomic word, moved on by a pick that is about to leave its
//     key's owner (always on a quiet node, on a few picks a tick on a busy
//     one), and every table build starts it at the build time.
//   - p2c: lock-free. Atomic per-server pick counters (padded); randomness
//     from math/rand/v2's runtime generator, which is per-thread.
//   - nearest: no per-pick state at all.
//
// Measured on the development machine (2 vCPU AMD EPYC, shared, so +-20%),
// go test -bench, ns per pick, 0 allocations in every case:
//
//	servers                    8     64    1024
//	swrr                      23    144    1830
//	chash (unbounded)         16     18      20
//	chash (bounded, eps .25)  43     68     120
//	p2c                       38     40      40
//	nearest (equal weights)   30    120    1500
//	nearest (4 weights)       90    270    1600
//
// (Bounded chash as measured on a busy machine, in CPU time per pick, next
// to the previous counting scheme at 25, 36 and 82: the replication and
// the decay cost a second compare-and-swap and, for the picks that spread,
// a few more counter reads.) Contention, from BenchmarkPickParallel -cpu
// 1,2 on one 64-server node (wall-clock ns per pick; perfect scaling halves
// it on two cores):
//
//	                      1 core   2 cores
//	chash (unbounded)        17        9    scales: read-only ring
//	nearest (equal)         117       62    scales: no state
//	p2c                      37       31    counters shared, 1.2x
//	chash (bounded)          68       44    hot keys' and servers' words shared, 1.5x
//	swrr                    117      130    the mutex: flat, slightly worse
//
// So a node's swrr tops out near 8 million picks a second and bounded chash
// near 15 million a core: two orders of magnitude above a regional
// scheduler's whole request rate, which is why a mutex per node is the
// right trade for swrr's exact sequence. swrr and nearest are linear in the
// node's size, which the deployment report's two-server nodes never notice;
// for nodes of hundreds of servers prefer chash or p2c. nearest takes one
// logarithm per distinct weight, so equal weights are cheapest.
//
// Builds (off the hot path): chash ring of 1,024 servers x 160 virtual
// nodes (164k points, radix-sorted) about 7.5 ms; a province table (200
// nodes x 50 servers, every selection, ring reused) about 10-15 ms.
//
// Cache affinity of bounded chash (epsilon 0.25, the default) under a
// Zipf(s) channel stream over 10,000 channels, arriving fast enough that
// the bound decides (a server's recent requests settle at about six times
// the floor), measured over two half-lives after three (go test -bench
// CHashAffinity, chash_affinity_test.go): copies is the servers a channel
// was sent to (mean over the channels requested / over the top 1%);
// primary and first two the share of requests served by the channel's
// ring owner / by it or the next server clockwise; max/mean the busiest
// server's requests over the mean, per unit of weight. Before: the
// previous scheme (every request counted until 2 x Window assignments,
// spill clockwise).
//
//	                     copies        primary      first two     max/mean
//	s    servers      before  after  before after  before after  before after
//	0.8       8    1.04/1.3 1.06/1.3   0.99  0.98    1.00  1.00    1.24  1.18
//	0.8      64    1.39/2.2 1.29/1.5   0.88  0.86    0.97  1.00    1.25  1.19
//	0.8    1024    2.63/8.0 1.47/5.0   0.62  0.60    0.79  0.86    1.26  1.25
//	1.1       8    1.10/1.5 1.06/1.3   0.85  0.83    0.95  1.00    1.25  1.19
//	1.1      64    1.55/2.7 1.26/1.9   0.57  0.56    0.73  0.81    1.26  1.25
//	1.1    1024    2.81/13  1.44/11    0.30  0.33    0.44  0.52    1.26  1.25
//	1.4       8    1.11/1.5 1.02/1.1   0.69  0.68    0.81  0.86    1.25  1.25
//	1.4      64    1.41/2.9 1.11/2.0   0.32  0.32    0.44  0.53    1.27  1.25
//	1.4    1024    2.59/14  1.50/16    0.13  0.15    0.20  0.25    1.26  1.27
//
// The first-two share is bounded by the stream, not only the policy: at 64
// servers under Zipf(1.1) no assignment that keeps every server within its
// bound serves more than 0.811 there (the top channel alone is ten
// servers' worth), and chash serves 0.807. Idle, the difference is the
// floor: the previous scheme sent the second request for a channel on a
// quiet three-server node to another server; now up to MinLoad requests
// (1,000 by default, recent ones, for a server of mean weight) stay on the
// channel's owner at any rate.
package balance
