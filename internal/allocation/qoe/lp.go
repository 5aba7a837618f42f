package qoe

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// WriteLP writes the instance as a CPLEX LP file: binary x_v_m_k (user v on
// server m at ladder rung k) and y_v (fallback), maximise sum of Y*QoE,
// one choice per user, bandwidth and compute per server. Options that can
// never fit a server are omitted (as in the solvers). With an origin cost
// c, binary z_m_h (server m pulls channel h) costs c in the objective and
// x_v_m_k <= z_m_h, summed over k, for each viewer v of h. CBC and glpsol
// --lp read it; its optimum is directly comparable with Result.Objective.
func WriteLP(w io.Writer, in *Instance) error {
	if err := in.Validate(); err != nil {
		return err
	}
	o := buildOptions(in)
	bw := bufio.NewWriter(w)
	num := func(f float64) string { return strconv.FormatFloat(f, 'g', 15, 64) }
	term := func(first bool, c float64, name string) string {
		if c < 0 {
			return " - " + num(-c) + " " + name
		}
		if first {
			return " " + num(c) + " " + name
		}
		return " + " + num(c) + " " + name
	}
	xname := func(v int, i int32) string { return fmt.Sprintf("x_%d_%d_%d", v, o.srv[i], o.rung[i]) }
	line := 0
	emit := func(s string) {
		if line > 200 {
			bw.WriteString("\n ")
			line = 0
		}
		bw.WriteString(s)
		line += len(s)
	}
	fmt.Fprintf(bw, "\\ anysched QoE allocation: %d users, %d servers, %d rungs\nMaximize\n obj:", len(in.Users), len(in.Servers), len(in.Ladder))
	first := true
	line = 0
	for v := range in.Users {
		emit(term(first, o.fb[v], fmt.Sprintf("y_%d", v)))
		first = false
		for i := o.start[v]; i < o.start[v+1]; i++ {
			emit(term(false, o.val[i], xname(v, i)))
		}
	}
	// pulls: z per pair, named by server and channel
	var zs []string
	if g := o.org; g != nil {
		zs = make([]string, g.npairs())
		for v := range in.Users {
			for i := o.start[v]; i < o.start[v+1]; i++ {
				if p := g.pair[i]; p >= 0 && zs[p] == "" {
					zs[p] = fmt.Sprintf("z_%d_%d", o.srv[i], in.Users[v].Channel)
					emit(term(false, -g.cost, zs[p]))
				}
			}
		}
	}
	bw.WriteString("\nSubject To\n")
	for v := range in.Users {
		line = 0
		fmt.Fprintf(bw, " one_%d: y_%d", v, v)
		for i := o.start[v]; i < o.start[v+1]; i++ {
			emit(" + " + xname(v, i))
		}
		bw.WriteString(" = 1\n")
	}
	if g := o.org; g != nil {
		for v := range in.Users {
			for s := g.slotStart[v]; s < g.slotStart[v+1]; s++ {
				a, b := g.slotOpt[s], g.slotOpt[s+1]
				if g.pair[a] < 0 {
					continue
				}
				line = 0
				fmt.Fprintf(bw, " pull_%d_%d:", v, o.srv[a])
				for i := a; i < b; i++ {
					emit(" + " + xname(v, i))
				}
				fmt.Fprintf(bw, " - %s <= 0\n", zs[g.pair[a]])
			}
		}
	}
	byServer := make([][]int32, len(in.Servers))
	owner := make([]int32, len(o.srv))
	for v := range in.Users {
		for i := o.start[v]; i < o.start[v+1]; i++ {
			byServer[o.srv[i]] = append(byServer[o.srv[i]], i)
			owner[i] = int32(v)
		}
	}
	for m, opts := range byServer {
		if len(opts) == 0 {
			continue
		}
		for dim := 0; dim < 2; dim++ {
			line = 0
			cap := in.Servers[m].Bandwidth
			name := "bw"
			if dim == 1 {
				cap, name = in.Servers[m].Compute, "cpu"
			}
			var terms int
			var sb strings.Builder
			fmt.Fprintf(&sb, " %s_%d:", name, m)
			bw.WriteString(sb.String())
			for _, i := range opts {
				c := o.ubw[o.use[i]]
				if dim == 1 {
					c = o.ucpu[o.use[i]]
				}
				if c == 0 {
					continue
				}
				emit(term(terms == 0, c, xname(int(owner[i]), i)))
				terms++
			}
			if terms == 0 {
				emit(" 0 " + xname(int(owner[opts[0]]), opts[0]))
			}
			fmt.Fprintf(bw, " <= %s\n", num(cap))
		}
	}
	bw.WriteString("Binary\n")
	for _, z := range zs {
		fmt.Fprintf(bw, " %s\n", z)
	}
	for v := range in.Users {
		fmt.Fprintf(bw, " y_%d\n", v)
		for i := o.start[v]; i < o.start[v+1]; i++ {
			fmt.Fprintf(bw, " %s\n", xname(v, i))
		}
	}
	bw.WriteString("End\n")
	return bw.Flush()
}

// ParseSolution reads a solution as "name value" pairs (CBC's `solu` file:
// a status line, then "index name value reduced-cost" lines; or any lines
// whose second-to-last-but-one or first field is a variable name) and returns
// the assignment. Users with no variable set to 1 are reported as an error.
func ParseSolution(r io.Reader, in *Instance) ([]Choice, error) {
	assign := make([]Choice, len(in.Users))
	set := make([]bool, len(in.Users))
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		for i := 0; i+1 < len(f); i++ {
			name := f[i]
			if !strings.HasPrefix(name, "x_") && !strings.HasPrefix(name, "y_") {
				continue
			}
			val, err := strconv.ParseFloat(f[i+1], 64)
			if err != nil || math.Abs(val-1) > 1e-6 {
				break
			}
			parts := strings.Split(name[2:], "_")
			ints := make([]int, len(parts))
			for j, p := range parts {
				if ints[j], err = strconv.Atoi(p); err != nil {
					return nil, fmt.Errorf("qoe: bad variable %q", name)
				}
			}
			v := ints[0]
			if v < 0 || v >= len(in.Users) {
				return nil, fmt.Errorf("qoe: variable %q out of range", name)
			}
			if name[0] == 'y' && len(ints) == 1 {
				assign[v] = Choice{Server: Fallback, Rung: in.Params.FallbackRung}
			} else if len(ints) == 3 {
				assign[v] = Choice{Server: ints[1], Rung: ints[2]}
			} else {
				return nil, fmt.Errorf("qoe: bad variable %q", name)
			}
			set[v] = true
			break
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for v, ok := range set {
		if !ok {
			return nil, fmt.Errorf("qoe: solution assigns nothing to user %d", v)
		}
	}
	return assign, nil
}
