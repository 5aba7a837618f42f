package outlier

// EdgeTotals turns the running request and error totals that edges report
// of themselves (health JSON stats) into the counts since the last report
// that Detector.Report takes. One caller at a time.
type EdgeTotals struct {
	last map[string][2]int64 // server name -> requests, errors last reported
}

// Since returns the requests and errors server name reported since its
// last totals; ok is false when there is nothing to report: no requests
// yet, the first totals seen, no new request, or a total that went down
// (the edge restarted, and counts again from there).
func (e *EdgeTotals) Since(name string, requests, errors int64) (dr, de int64, ok bool) {
	if requests <= 0 {
		return 0, 0, false
	}
	if e.last == nil {
		e.last = map[string][2]int64{}
	}
	last, seen := e.last[name]
	e.last[name] = [2]int64{requests, errors}
	if !seen || requests < last[0] || errors < last[1] || requests == last[0] {
		return 0, 0, false
	}
	return requests - last[0], errors - last[1], true
}
