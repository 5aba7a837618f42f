package ctl

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"gopkg.in/yaml.v3"
)

// The -o formats.
const (
	formatTable = "table"
	formatYAML  = "yaml"
	formatJSON  = "json"
)

// output is an -o flag: one of the formats a command offers, checked when
// the flag is parsed, so a wrong one fails before any RPC.
type output struct {
	format  string
	formats []string
}

// outputFlag defines -o on fs with the formats the command offers; the
// first is the default.
func outputFlag(fs *flag.FlagSet, formats ...string) *output {
	o := &output{format: formats[0], formats: formats}
	fs.Var(o, "o", "output `format`: "+orList(formats))
	return o
}

func (o *output) String() string { return o.format }

func (o *output) Set(s string) error {
	if !slices.Contains(o.formats, s) {
		return fmt.Errorf("want %s", orList(o.formats))
	}
	o.format = s
	return nil
}

// orList is "a, b or c".
func orList(words []string) string { return list(words, "or") }

// list joins words as a sentence does: "a, b and c".
func list(words []string, conj string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " " + conj + " " + words[len(words)-1]
}

// render prints what a command shows: data as JSON or YAML, or, for table,
// its text form (tables, for most commands).
func render(w io.Writer, o *output, data any, text func(io.Writer) error) error {
	switch o.format {
	case formatJSON:
		return writeJSON(w, data)
	case formatYAML:
		return writeYAML(w, data)
	default:
		return text(w)
	}
}

// table is rows under a header, printed with aligned columns.
type table struct {
	title  string // a line above the header; none if empty
	header []string
	rows   [][]string
}

func newTable(header ...string) *table { return &table{header: header} }

// add appends a row; cells print as fmt.Sprint does (format floats before).
func (t *table) add(cells ...any) {
	row := make([]string, len(cells))
	for i, c := range cells {
		row[i] = fmt.Sprint(c)
	}
	t.rows = append(t.rows, row)
}

// writeTables prints tables one after another with a blank line between
// them; each aligns its own columns.
func writeTables(w io.Writer, tables ...*table) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, t := range tables {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		if t.title != "" {
			fmt.Fprintln(tw, t.title)
		}
		fmt.Fprintln(tw, strings.Join(t.header, "\t"))
		for _, r := range t.rows {
			fmt.Fprintln(tw, strings.Join(r, "\t"))
		}
	}
	return tw.Flush()
}

// protoJSON is how API messages print: with the names of the .proto (as
// the docs spell them) and every field even when zero (a script reads
// `false` and `0` rather than guess from a missing key).
func protoJSON(m proto.Message) ([]byte, error) {
	return protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(m)
}

// writeJSON prints v indented by two spaces: an API message in its
// protojson form, anything else as encoding/json does. protojson's own
// indentation varies from build to build on purpose, so its compact form
// is indented here: the output is the same every time.
func writeJSON(w io.Writer, v any) error {
	var b []byte
	var err error
	if m, ok := v.(proto.Message); ok {
		b, err = protoJSON(m)
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err = w.Write(out.Bytes())
	return err
}

// writeYAML prints v as YAML: an API message with the same fields, names
// and values as its JSON form, anything else as yaml.v3 does.
func writeYAML(w io.Writer, v any) error {
	if m, ok := v.(proto.Message); ok {
		b, err := protoJSON(m)
		if err != nil {
			return err
		}
		// JSON is YAML: read it as a node tree, which keeps the fields'
		// order, and print it in block style rather than JSON's flow style.
		var n yaml.Node
		if err := yaml.Unmarshal(b, &n); err != nil {
			return err
		}
		blockStyle(&n)
		v = &n
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return err
	}
	return enc.Close()
}

func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}
