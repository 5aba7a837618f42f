// Package outlier ejects failing edge servers between health probes, from
// what the scheduler sees of its own answers (after Envoy's outlier
// detection). It is pure: no I/O besides metrics and logs, no goroutine
// unless Run is called; the HTTP and DNS front ends feed it and the routing
// engine leaves out what it ejects.
//
// # Signals
//
// Re-asks. A set-top box asks the scheduler for a channel and is redirected
// to an edge server. If the same client asks again for the same content
// within reask_window (10s), its player gave up on the server of the first
// answer: that is a failure of that server. The front end calls Observe once
// per answered request with a hash of the client address, a hash of the
// content, the server chosen and the time. Observe keeps one atomic word per
// slot of a fixed table (slots, 65,536) indexed by the hash of the pair; the
// word holds a tag of the hash, the server, the request's number at that
// server and a coarse time (slot.go), and is swapped for the new answer in
// one atomic operation. Its cost is that swap, one atomic add on the server's
// request counter and some arithmetic: no lock, no allocation.
//
// Edge reports. The health prober passes each server's request and error
// (5xx) counts since its previous report to Report.
//
// What the signals miss or add, so that thresholds are set knowingly:
//   - A pair whose slot is overwritten by another pair before the re-ask
//     is forgotten: re-asks are lost, never invented (a false match needs 28
//     bits of hash to agree). Size slots at several times peak requests per
//     second x reask_window; a flash crowd makes the table a sample.
//   - Zapping back (A, B, A within the window) and several boxes behind one
//     address tuning the same channel look like re-asks. This noise is
//     spread over all servers; the rate rule's threshold must sit above it,
//     and the consecutive rule needs a run of such coincidences at one
//     server.
//   - A re-ask that reaches another scheduler instance is not seen.
//
// # Rules
//
// Evaluate, about once a second (Run), applies per server:
//
//   - consecutive: consecutive_failures (5) requests in a row sent to the
//     server were all re-asked. Envoy resets its count on a success; here a
//     success is only known when reask_window passes without a re-ask, so
//     instead every failure records the number of the failed request (its
//     order among the server's requests, carried in the slot) and the rule
//     looks for a run of consecutive numbers among the last 64 failures. An
//     answer between two failed ones that was not re-asked breaks the run,
//     whenever its window ends; a dead server's failures arrive out of order
//     and still form the run. Cheaper rules mistake noise for a run: resetting
//     after k requests without a failure ejects a busy healthy server whose
//     2% of re-asks are zapping back every minute or so.
//   - rate: over the last interval (10s, sampled in tenths), requests >=
//     min_requests (20) and re-asks/requests >= failure_rate (0.5); the
//     same test is applied separately to the edge's reported errors/requests
//     (edge requests are segments, not channel starts, so the two are not
//     added together).
//
// A failing server is ejected for n x base_ejection (30s), n being its
// ejections in a row, capped at max_ejection (5m); n starts again from one
// once the server has been back for max_ejection without an ejection. At
// most max_ejected_share (0.5, rounded down) of a node's servers are
// ejected at once, and always one stays: the most failing go first, the rest
// keep serving (anysched_outlier_ejections_skipped_total, Why). Failures of
// requests sent before an ejection or during it are spent: a server comes
// back with a clean slate. Health probes stay the authority on a server
// being down; the engine's panic threshold covers a node whose servers are
// ejected or down together.
//
// # Wiring
//
//	d, err := outlier.New(cfg, reg, log)
//	d.SetServers(nodeOf, names)                  // on every topology change, before publishing it
//	d.Observe(clientHash, contentHash, server, now.UnixNano()) // per answered request
//	d.Report(server, requests, errors)            // per health report
//	go d.Run(ctx, time.Second, rebuild)           // rebuild reads d.EjectedSet()
//
// SetServers keeps each server's counters and ejection state by name across
// re-indexing; an answer remembered under the previous numbering is
// translated (a slot carries the parity of its table), so only two topology
// changes within one reask_window can misattribute a re-ask.
package outlier
