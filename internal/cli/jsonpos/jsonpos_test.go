package jsonpos

import (
	"strings"
	"testing"
)

const doc = `{
  "ttlMinutes": 5,
  "grantEnv": { "PORT": "{port}" },
  "slots": [
    { "id": 1, "ports": { "api": 3000 } },
    { "id": "ü2", "tags": [ "a", { "deep": true } ] }
  ]
}
`

func TestFind(t *testing.T) {
	for _, tc := range []struct {
		path string
		want string // LINE:COLUMN, or "" for none
	}{
		{"$", "1:1"},
		{"$.ttlMinutes", "2:3"},
		{"$.grantEnv", "3:3"},
		{"$.grantEnv.PORT", "3:17"},
		{"$.slots", "4:3"},
		{"$.slots[0]", "5:5"},
		{"$.slots[0].id", "5:7"},
		{"$.slots[0].ports.api", "5:27"},
		{"$.slots[1]", "6:5"},
		{"$.slots[1].tags", "6:19"},
		{"$.slots[1].tags[1].deep", "6:36"},
		{"$.slots[2]", ""},
		{"$.nothing", ""},
	} {
		pos, ok := Find([]byte(doc), tc.path)
		got := ""
		if ok {
			got = pos.String()
		}
		if got != tc.want {
			t.Errorf("Find %s = %q, want %q", tc.path, got, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       string // PATH LINE:COLUMN MESSAGE, or "" for no mistake
	}{
		{"good", doc, ""},
		{"a missing comma between slots", "{\n  \"slots\": [\n    { \"id\": 1 }\n    { \"id\": 2 }\n  ]\n}\n",
			"$.slots[1] 4:5 invalid character '{' after array element"},
		{"a trailing comma", "{\n  \"ttlMinutes\": 5,\n}", "$ 3:1 invalid character '}' looking for beginning of object key string"},
		{"a missing value", `{"slots": [ {"id": } ]}`, "$.slots[0].id 1:20 invalid character '}' looking for beginning of value"},
		{"not JSON", "slots: [1, 2]\n", "$ 1:1 invalid character 's' looking for beginning of value"},
		{"cut short", "{\n  \"slots\": [\n", "$.slots[0] 3:1 the text ends before the value does"},
		{"empty", "  \n", "$ 2:1 the text ends before the value does"},
		{"two values", `{"slots": []} {"slots": []}`, "$ 1:15 trailing data after the value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := Check([]byte(tc.text))
			got := ""
			if m != nil {
				got = m.Path + " " + m.Position.String() + " " + m.Msg
			}
			if got != tc.want {
				t.Errorf("Check = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAtCountsCharacters(t *testing.T) {
	text := []byte("{\"é\":\n  \"ü\" x")
	if got := At(text, int64(strings.Index(string(text), "x"))).String(); got != "2:7" {
		t.Errorf("At = %s, want 2:7", got)
	}
}

func FuzzCheck(f *testing.F) {
	f.Add(doc)
	f.Add(`{"a":[1,2,{"b":}]}`)
	f.Fuzz(func(t *testing.T, text string) {
		m := Check([]byte(text))
		if m != nil && (m.Line < 1 || m.Column < 1 || !strings.HasPrefix(m.Path, "$")) {
			t.Fatalf("%+v", m)
		}
		Find([]byte(text), "$.a[0]")
	})
}
