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
// result does not depend on the machine's load unless a wall-clock limit
// (TimeLimit, the context, or a local search's safety deadline) ends a
// phase first, as on very large instances.
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
// 5*PrimalEvery without), the relaxed choice is repaired (per overloaded
// server, apply the change with least loss per unit of normalised excess
// removed: lower rung, move to a server with room, or fallback) and improved
// by single moves; the best is finally polished by local search: single
// moves incl. bitrate up/down, then ejection moves (v takes a blocked option
// after one user there moves to its best alternative elsewhere, to another
// rung on that server, into the room v leaves, or to fallback: this includes
// swaps and one user's bitrate down for another's up), repeated until no
// move improves or the work budget of LocalSearch is spent. Prices (per
// kbps, per compute unit) are those of the best bound, for pricing new
// sessions online.
//
// Time budget: TimeLimit counts from the start of Solve, including the
// option table (about 1 s at 100,000 users and 2,000 servers), but the first
// subgradient iteration and its repair always run, even with no time left
// or a done context: every result is feasible and carries a bound. (Before
// this rule a solve that ran out of time while building the table repaired
// an uninitialised choice vector, putting users on another user's option,
// i.e. on servers that do not cover them; TestNoTimeLeftStillFeasible.)
// At 100,000 users the default 2 s budget leaves room for 2-22 iterations
// (measured on the shared 2-core machine, depending on its load), with a
// gap of 9-11%; the primal side does not improve within the budget (the final
// polish's work budget is about one pass of single moves over the 8.2
// million options, and every server is full).
//
// The candidate lists M(v) and their distances are cached in the Instance
// (keyed on its Users and Servers slices): build a new Instance rather than
// editing users or servers in place after a solve.
//
// Baselines: Nearest, Random, LowestLatency, HighestBitrate and LaiGreedy
// (after Lai et al., ICSOC 2018). WriteLP exports the exact model in CPLEX
// LP format for CBC and GLPK; Evaluate checks and scores any assignment.
package qoe
