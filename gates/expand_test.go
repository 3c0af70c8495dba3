package gates

import (
	"reflect"
	"testing"
)

func TestExpand(t *testing.T) {
	outer := map[string]string{"PGPORT": "5433", "PATH": "/bin", "EMPTY": ""}
	lookup := func(name string) (string, bool) {
		v, ok := outer[name]
		return v, ok
	}
	tests := []struct {
		name    string
		env     string // the env mapping's lines
		want    []string
		wantErr string
	}{
		{"file order", "  B: two\n  A: one\n  C: three\n", []string{"B=two", "A=one", "C=three"}, ""},
		{"braced and bare", "  URL: pg://h:${PGPORT}/db_$PGPORT.x\n", []string{"URL=pg://h:5433/db_5433.x"}, ""},
		{"literal dollar", "  PRICE: $$5 and $${PGPORT}\n", []string{"PRICE=$5 and ${PGPORT}"}, ""},
		{"earlier entry", "  DB: app\n  URL: pg:///${DB}\n", []string{"DB=app", "URL=pg:///app"}, ""},
		{"earlier entry shadows lookup", "  PGPORT: 6000\n  URL: :$PGPORT\n", []string{"PGPORT=6000", "URL=:6000"}, ""},
		{"self reference uses lookup", "  PATH: ${PATH}:/opt/bin\n", []string{"PATH=/bin:/opt/bin"}, ""},
		{"defined but empty", "  X: a${EMPTY}b\n", []string{"X=ab"}, ""},
		{"expanded text is not expanded again", "  A: $$B\n  C: $A\n", []string{"A=$B", "C=$B"}, ""},
		{"greedy bare name", "  A: $PGPORTX\n", nil, "g.yaml:3:3: env A: $PGPORTX is not defined: it is neither an earlier env entry nor set in the environment"},
		{"undefined", "  OK: 1\n  URL: ${NOPE}\n", nil, "g.yaml:4:3: env URL: ${NOPE} is not defined: it is neither an earlier env entry nor set in the environment"},
		{"later entry is not visible", "  A: $B\n  B: x\n", nil, "g.yaml:3:3: env A: $B is not defined: ..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := Parse([]byte("pool: p\nenv:\n"+tt.env+"phases: [{run: x}]\n"), "g.yaml")
			if err != nil {
				t.Fatal(err)
			}
			got, err := g.Expand(lookup)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("Expand = %q, want error %q", got, tt.wantErr)
				}
				checkMessage(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Expand = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestExpandMalformed builds gates by hand: Parse refuses these values.
func TestExpandMalformed(t *testing.T) {
	tests := []struct {
		name, value, want string
	}{
		{"open brace", "a${", `gate.yaml:7:3: env V: unterminated "${" (write $$ for a literal $)`},
		{"unterminated", "${A", `gate.yaml:7:3: env V: unterminated "${" ...`},
		{"digit first", "${1x}", `gate.yaml:7:3: env V: malformed reference "${1x}": only ${NAME} is supported, NAME matching ^[A-Za-z_][A-Za-z0-9_]*$ (write $$ for a literal $)`},
		{"empty braces", "${}", `gate.yaml:7:3: env V: malformed reference "${}": ...`},
		{"default syntax", "${A:-x}", `gate.yaml:7:3: env V: malformed reference "${A:-x}": ...`},
		{"trailing dollar", "a$", `gate.yaml:7:3: env V: a "$" not followed by a name or {name} (write $$ for a literal $)`},
		{"dollar digit", "$1", `gate.yaml:7:3: env V: a "$" not followed by a name or {name} ...`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &Gate{Path: "gate.yaml", Env: []EnvVar{{Name: "V", Value: tt.value, Line: 7, Column: 3}}}
			got, err := g.Expand(func(string) (string, bool) { return "x", true })
			if err == nil {
				t.Fatalf("Expand = %q, want an error", got)
			}
			checkMessage(t, err, tt.want)
		})
	}
}

func TestExpandNilLookup(t *testing.T) {
	g := &Gate{Path: "/g.yaml", Env: []EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "$A$$"}}}
	got, err := g.Expand(nil)
	if err != nil || !reflect.DeepEqual(got, []string{"A=1", "B=1$"}) {
		t.Errorf("Expand(nil) = %q, %v", got, err)
	}
	g.Env = append(g.Env, EnvVar{Name: "C", Value: "$HOME", Line: 3, Column: 1})
	if _, err := g.Expand(nil); err == nil {
		t.Error("Expand(nil) of $HOME succeeded, want an error")
	}
}
