package balance

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestConfigEqualSeesEveryField changes each leaf field of a policy in
// turn: Equal must tell every change, so that an engine is rebuilt when
// any part of the policy changes.
func TestConfigEqualSeesEveryField(t *testing.T) {
	base := func() Config {
		c := DefaultConfig()
		c.Key.Query = []string{"rendition"}
		c.Weights = map[string]float64{"hf-1": 1}
		return c
	}
	if c := base(); !c.Equal(base()) {
		t.Fatal("a policy differs from its copy")
	}
	var walk func(typ reflect.Type, index []int, path string)
	walk = func(typ reflect.Type, index []int, path string) {
		if typ.Kind() == reflect.Struct && typ != reflect.TypeFor[time.Time]() {
			for i := range typ.NumField() {
				walk(typ.Field(i).Type, append(slices.Clone(index), i), path+"."+typ.Field(i).Name)
			}
			return
		}
		c := base() // only this field changed
		f := reflect.ValueOf(&c).Elem().FieldByIndex(index)
		switch f.Kind() {
		case reflect.Float64:
			f.SetFloat(f.Float() + 1)
		case reflect.Int, reflect.Int64:
			f.SetInt(f.Int() + 1)
		case reflect.Uint8:
			f.SetUint(f.Uint() + 1)
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Slice:
			f.Set(reflect.Append(f, reflect.ValueOf("programme")))
		case reflect.Map:
			f.SetMapIndex(reflect.ValueOf("hf-2"), reflect.ValueOf(2.0))
		case reflect.Func:
			f.Set(reflect.ValueOf(func() uint64 { return 4 }))
		case reflect.Struct: // time.Time
			f.Set(reflect.ValueOf(time.Unix(1, 0)))
		default:
			t.Fatalf("%s: a %s field: teach this test to change it", path, f.Kind())
		}
		if c.Equal(base()) {
			t.Errorf("Equal misses a change of %s", path)
		}
	}
	walk(reflect.TypeFor[Config](), nil, "")
}
