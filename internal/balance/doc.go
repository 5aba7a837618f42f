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
//     ring of virtual nodes, with bounded loads so a hot channel spills to
//     its ring neighbours instead of melting one cache.
//   - p2c (NewP2C): power of two choices on a CPU / bandwidth / connections
//     score, with local pick counts bridging the gap between health reports.
//   - qoe is internal/allocator's (model in internal/qoe); a Table serves nearest for STBs its plan does
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
// sequence position and failure penalties, chash's recent loads and the
// adaptive weights' smoothing by server name, and reuses a chash ring whose
// servers and weights did not change. While servers slow-start, keep
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
//   - chash: lock-free. The ring is immutable; recent loads are one atomic
//     counter per server on its own 128-byte line plus a total; a pick claims
//     a slot with a compare-and-swap. The total is the one line every pick
//     writes, so it is where cores meet.
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
//	chash (bounded, eps .25)  26     39      82
//	p2c                       38     40      40
//	nearest (equal weights)   30    120    1500
//	nearest (4 weights)       90    270    1600
//
// Contention, from BenchmarkPickParallel -cpu 1,2 on one 64-server node
// (wall-clock ns per pick; perfect scaling halves it on two cores):
//
//	                      1 core   2 cores
//	chash (unbounded)        17        9    scales: read-only ring
//	nearest (equal)         117       62    scales: no state
//	p2c                      37       31    counters shared, 1.2x
//	chash (bounded)          33       36    the total counter: flat
//	swrr                    117      130    the mutex: flat, slightly worse
//
// So a node's swrr tops out near 8 million picks a second and bounded chash
// near 30 million however many cores pick: two orders of magnitude above a
// regional scheduler's whole request rate, which is why a mutex per node is
// the right trade for swrr's exact sequence. swrr and nearest are linear in
// the node's size, which the deployment report's two-server nodes never notice; for
// nodes of hundreds of servers prefer chash or p2c. nearest takes one
// logarithm per distinct weight, so equal weights are cheapest.
//
// Builds (off the hot path): chash ring of 1,024 servers x 160 virtual
// nodes (164k points, radix-sorted) about 7 ms; a province table (200 nodes
// x 50 servers, every selection, ring reused) about 10-15 ms.
//
// Spread of a Zipf(1.1) channel stream (10,000 channels, 10^6 requests),
// busiest server over mean per unit of weight, and the share of requests
// served by the channel's ring owner:
//
//	servers               8            64           1024
//	unbounded       2.05 / 1.00   6.16 / 1.00   97.8 / 1.00
//	bounded .25     1.25 / 0.85   1.26 / 0.57   1.26 / 0.30
//	bounded .10     1.10 / 0.81   1.11 / 0.49   1.11 / 0.25
//
// The bound holds over recent assignments (the counters halve every Window
// assignments), so cumulative spread can sit a hair above 1+epsilon. A
// spilled channel walks clockwise, so its overflow lands on the same few
// neighbours every time and stays cache-affine among them.
package balance
