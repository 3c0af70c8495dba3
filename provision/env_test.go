package provision

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestSlotEnv(t *testing.T) {
	base := []string{"POOL_ACTION=reset", "POOL_SLOT_ID=7", "POOL_SLOT_KIND=pg"}
	tests := []struct {
		name  string
		attrs map[string]any
		want  []string // besides base
	}{
		{"no attributes", nil, nil},
		{"string raw", map[string]any{"db": "app db;$(x)"}, []string{"POOL_SLOT_DB=app db;$(x)"}},
		{"key upper-cased and sanitised", map[string]any{"data-dir.path": "/d", "ünï": "u"},
			[]string{"POOL_SLOT_DATA_DIR_PATH=/d", "POOL_SLOT__N_=u"}},
		{"integral float as integer", map[string]any{"port": 3000.0}, []string{"POOL_SLOT_PORT=3000"}},
		{"big float as JSON writes it", map[string]any{"n": 1e21}, []string{"POOL_SLOT_N=1e+21"}},
		{"fraction kept", map[string]any{"ratio": 1.5}, []string{"POOL_SLOT_RATIO=1.5"}},
		{"negative", map[string]any{"off": -2.0}, []string{"POOL_SLOT_OFF=-2"}},
		{"json.Number verbatim", map[string]any{"port": json.Number("5432")}, []string{"POOL_SLOT_PORT=5432"}},
		{"Go int", map[string]any{"port": 6379}, []string{"POOL_SLOT_PORT=6379"}},
		{"NaN does not panic", map[string]any{"x": math.NaN()}, []string{"POOL_SLOT_X=NaN"}},
		{"booleans", map[string]any{"on": true, "off": false}, []string{"POOL_SLOT_OFF=false", "POOL_SLOT_ON=true"}},
		{"null is empty", map[string]any{"none": nil}, []string{"POOL_SLOT_NONE="}},
		{"nested object flattened", map[string]any{"ports": map[string]any{"api": 3000.0, "db": map[string]any{"main": 5432.0}}},
			[]string{"POOL_SLOT_PORTS_API=3000", "POOL_SLOT_PORTS_DB_MAIN=5432"}},
		{"empty object gives nothing", map[string]any{"empty": map[string]any{}}, nil},
		{"array compact JSON", map[string]any{"tags": []any{"a", "b"}}, []string{`POOL_SLOT_TAGS=["a","b"]`}},
		{"array of mixed values unescaped", map[string]any{"l": []any{1.0, "<&>", nil, map[string]any{"k": true}}},
			[]string{`POOL_SLOT_L=[1,"<&>",null,{"k":true}]`}},
		{"empty array", map[string]any{"l": []any{}}, []string{"POOL_SLOT_L=[]"}},
		{"id and kind win over attributes", map[string]any{"ID": "x", "Kind": "y"}, nil},
		{"first key path wins a collision", map[string]any{"a_b": "flat", "a": map[string]any{"b": "nested"}, "a-b": "dash"},
			[]string{"POOL_SLOT_A_B=nested"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SlotEnv(Slot{ID: "7", Kind: "pg", Attributes: tt.attrs}, ActionReset)
			want := append(slices.Clone(base), tt.want...)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("SlotEnv =\n  %q\nwant\n  %q", got, want)
			}
		})
	}
}

func TestSlotEnvDeterministic(t *testing.T) {
	attrs := map[string]any{}
	for _, k := range strings.Fields("z y x w v u t s r q p o n m l k j i h g f e d c b a") {
		attrs[k] = k
		attrs[k+"-"] = map[string]any{"n": k}
	}
	first := SlotEnv(Slot{ID: "1", Kind: "k", Attributes: attrs}, ActionHealth)
	if !slices.IsSorted(first) {
		t.Errorf("SlotEnv output is not sorted: %q", first)
	}
	for range 20 {
		if got := SlotEnv(Slot{ID: "1", Kind: "k", Attributes: attrs}, ActionHealth); !slices.Equal(got, first) {
			t.Fatalf("SlotEnv changed between calls:\n  %q\n  %q", first, got)
		}
	}
}

func TestSlotEnvFromJSON(t *testing.T) {
	var attrs map[string]any
	if err := json.Unmarshal([]byte(`{"ports":{"api":3000},"tags":["a","b"],"mem":0.5}`), &attrs); err != nil {
		t.Fatal(err)
	}
	got := SlotEnv(Slot{ID: "3", Kind: "redis", Attributes: attrs}, ActionProvision)
	want := []string{
		"POOL_ACTION=provision",
		"POOL_SLOT_ID=3",
		"POOL_SLOT_KIND=redis",
		"POOL_SLOT_MEM=0.5",
		"POOL_SLOT_PORTS_API=3000",
		`POOL_SLOT_TAGS=["a","b"]`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("SlotEnv =\n  %q\nwant\n  %q", got, want)
	}
}
