// Package qoe is the QoE-aware user allocation model and its solvers (Liu
// et al., "User allocation strategy for interactive live streaming
// in edge computing", JCRD 60(8), 2023): each active session v is given one
// covering edge server m in M(v) and a ladder bitrate r, or the regional
// fallback, to maximise
//
//	sum_v Y_v * QoE(v, m_v, r_v)
//	QoE = a*Q + b*U - c*E - d*S
//	Q   = (theta - L) * I_v,  I_v = F_v / (F_v + lambda*Fbar_room)
//	L   = T_ingest + T(m_b, m) + T(m, v) + (R - r)*G
//	U   = ln(b1 * min(r, Rhat_v) / Rhat_v)
//	E   = k * max(0, R_prev - r);  S = s if the user was on another server
//	Y_v = log10(10 + omega*p_v)
//
// subject to, per server, sum r_v <= D_m and sum (R - r_v)*H <= C_m.
// A user with PrevServer < 0 (new, or on fallback last period) pays no S; a
// user with PrevKbps = 0 (new) pays no E.
//
// The package is pure (no I/O besides WriteLP/ParseSolution) and
// deterministic for a given time budget: the local searches are bounded by
// work (LocalSearch converted at a fixed rate), not by the clock, so the
// result does not depend on the machine's load nor on GOMAXPROCS unless a
// wall-clock limit (TimeLimit, the context, or a local search's safety
// deadline) ends a phase first, as on very large instances.
//
// # Parameters and defaults (Params, DefaultParams, DefaultLadder)
//
// Units: seconds, kbps, compute units ("vCPU"). Every default and the reason
// for it (the paper's parameter table is not in our copy, so most are our choices) are
// in docs/design.md, "Model parameters and their defaults", with a link to
// the sensitivity table in docs/benchmarks.md.
//
// # Solvers
//
// Lagrangian ("qoe") dualises both capacity constraints with per-server
// prices; at fixed prices the problem splits per user (best option at the
// reduced value), and the dual is the LP relaxation's bound. Prices follow
// projected Polyak steps towards the best feasible value along the deflected
// subgradient d = g + 0.3*d_prev, starting at scale 1 and halving it after 4
// non-improving iterations (on the EUA instance this reaches the LP bound
// within ~150 iterations; the former rule, scale 2 and halving after 15
// without deflection, stayed ~0.8% above it after 200). Every dual value is
// an upper bound; Result.Bound is the smallest. At iteration 0, whenever the
// relaxed choice is feasible, and every PrimalEvery iterations once the
// bound moves by less than 0.5% per PrimalEvery iterations (or after
// 5*PrimalEvery without), a primal step runs two heuristics, one per core:
// the repair of the relaxed choice (per overloaded server, apply the change
// with least loss per unit of normalised excess removed: lower rung, move
// to a server with room, or fallback) and the regret greedy (users in
// decreasing order of best minus second-best reduced value on another
// server take their best option by reduced value that fits), each improved
// by single moves. On a large instance (more than 2^20 options) the repair
// runs at iteration 0 only (at the prices of later iterations it ends
// 4-10% below the greedy at 100,000 users, and costs more), and the other
// core runs the greedy at the best bound's prices. The best is finally
// polished by local search: single moves incl. bitrate up/down, then
// ejection moves (v takes a blocked option after one user there moves to
// its best alternative elsewhere, to another rung on that server, into the
// room v leaves, or to fallback: this includes swaps and one user's bitrate
// down for another's up), repeated until no move improves or the work
// budget of LocalSearch is spent. Prices (per kbps, per compute unit) are
// those of the best bound, for pricing new sessions online.
//
// The per-user evaluation (the subproblem) runs on GOMAXPROCS workers over
// fixed chunks of users, allocating nothing per iteration; loads are summed
// as integer counts and the dual per chunk in chunk order, so results do
// not depend on the number of cores. On a large instance the scan reads
// float32 values rounded up (8 bytes an option instead of 12; a value
// rounded up only raises the dual, which stays a bound). Candidates, their
// distances and the option values are computed once per solve, on every
// core.
//
// Warm starts: SolveWarm starts from a previous period's prices and plan
// (Warm), and Planner keeps them across periods (and the candidate lists of
// users that did not move), so that a re-solve after churn and movement
// needs a few iterations: the warm plan, repaired and with the new users
// placed by the greedy, is certified by the dual at the previous prices.
//
// Time budget: TimeLimit counts from the start of Solve, including the
// option table, but the first subgradient iteration and its repair always
// run, even with no time left or a done context: every result is feasible
// and carries a bound. (Before this rule a solve that ran out of time while
// building the table repaired an uninitialised choice vector, putting users
// on another user's option, i.e. on servers that do not cover them;
// TestNoTimeLeftStillFeasible.) At 100,000 users and 2,000 servers (8.2
// million options) a cold solve certifies a gap of 1% in 61-71 iterations
// and about 2 s on the 2-core machine (about 3.3 s of CPU: longer when
// other work takes the cores), and a warm re-solve (Planner) after 10%
// churn and 20% movement in 1 iteration and about 0.4 s
// (docs/benchmarks.md). With the default Tol a solve uses its whole
// TimeLimit: set Tol to stop at a certified gap.
//
// The candidate lists M(v) and their distances are cached in the Instance
// (keyed on its Users and Servers slices): build a new Instance rather than
// editing users or servers in place after a solve.
//
// # Shared origin cost
//
// With Params.OriginCost = c > 0 a server pulls each channel (User.Channel)
// from the origin once for all its viewers, and the objective is net of
// c per (server, channel) pair with a viewer (OriginPulls counts them and
// their traffic, one source stream of R each). At fixed prices the
// subproblem is then per channel, an uncapacitated facility location; its
// bound is the smallest of the LP dual that dual descent (Erlenkotter)
// finds and two bounds that charge the pull per kbps or per compute unit of
// the server's capacity (one pair can carry no more than the server), each
// valid whatever the prices (the argument is in origin_bound.go and tested
// against enumeration). The relaxed choice puts each viewer on its best
// pulled server; repair and the local search count the pulls a move opens
// or empties, the greedy charges a pair's amortised share, and two moves
// close a pair with few viewers or gather a channel's viewers onto one
// server. With c = 0 none of this runs, and results are those without it,
// bit for bit.
//
// Baselines: Nearest, Random, LowestLatency, HighestBitrate and LaiGreedy
// (after Lai et al., ICSOC 2018). WriteLP exports the exact model in CPLEX
// LP format for CBC and GLPK; Evaluate checks and scores any assignment.
package qoe
