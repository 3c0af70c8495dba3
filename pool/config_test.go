package pool_test

import (
	"encoding/json"
	"errors"
	"github.com/durable-lease/durable-lease/pool"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLoadFileDefaults(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "pool.json")
	if err := os.WriteFile(file, []byte(`{"provision": "prov --slot", "slots": [{"id": 1}]}`), 0o666); err != nil {
		t.Fatal(err)
	}
	c, err := pool.LoadFile(file)
	if err != nil {
		t.Fatalf("LoadFile: %v", err)
	}
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"File", c.File, file},
		{"Name", c.Name, "pool"},
		{"KindPrefix", c.KindPrefix, "slot-"},
		{"QueueLockKind", c.QueueLockKind, "pool-queue"},
		{"NudgeEvent", c.NudgeEvent, "lease-granted"},
		{"ShellPrefix", c.ShellPrefix, "POOL_LEASE"},
		{"Bookkeeper", c.Bookkeeper, ""},
		{"TTLMinutes", c.TTLMinutes, 30.0},
		{"WaiterStale", c.WaiterStale, 90 * time.Second},
		{"MovingAvgSeed", c.MovingAvgSeed, 8 * time.Minute},
		{"Dir", c.Dir, dir},
		{"Provision", c.Provision, "prov --slot"},
		{"Reset defaults to provision", c.Reset, "prov --slot"},
		{"Health", c.Health, ""},
		{"NudgeCommand", c.NudgeCommand, ""},
		{"GrantEnv", c.GrantEnv == nil, true},
		{"slots", len(c.Slots), 1},
		{"slot ID", c.Slots[0].ID, "1"},
		{"slot RawID", c.Slots[0].RawID, json.Number("1")},
		{"slot Kind", c.Slots[0].Kind, "slot-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !reflect.DeepEqual(tc.got, tc.want) {
				t.Errorf("got %#v, want %#v", tc.got, tc.want)
			}
		})
	}
}

func TestParseOptions(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	tests := []struct {
		name  string
		json  string
		check func(t *testing.T, c *pool.Config)
	}{
		{"minimal", `{"slots":[{"id":"a"}]}`, func(t *testing.T, c *pool.Config) {
			if c.Slots[0].ID != "a" || c.Slots[0].RawID != "a" || c.Slots[0].Kind != "slot-a" {
				t.Errorf("slot = %+v", c.Slots[0])
			}
			if len(c.Slots[0].Attributes) != 0 {
				t.Errorf("attributes = %v, want none", c.Slots[0].Attributes)
			}
			if c.Provision != "" || c.Reset != "" || c.Health != "" {
				t.Errorf("commands = %q %q %q, want none", c.Provision, c.Reset, c.Health)
			}
		}},
		{"naming options", `{"name":"e2e","kindPrefix":"e2e-slot-","nudgeEvent":"ping","shellPrefix":"E2E","bookkeeper":"broker","slots":[{"id":1}]}`,
			func(t *testing.T, c *pool.Config) {
				if c.Name != "e2e" || c.QueueLockKind != "e2e-queue" || c.NudgeEvent != "ping" || c.ShellPrefix != "E2E" || c.Bookkeeper != "broker" {
					t.Errorf("config = %+v", c)
				}
				if c.Slots[0].Kind != "e2e-slot-1" {
					t.Errorf("kind = %q, want e2e-slot-1", c.Slots[0].Kind)
				}
			}},
		{"explicit queue lock kind", `{"queueLockKind":"q-lock","slots":[{"id":1}]}`, func(t *testing.T, c *pool.Config) {
			if c.QueueLockKind != "q-lock" {
				t.Errorf("QueueLockKind = %q", c.QueueLockKind)
			}
		}},
		{"explicit reset", `{"provision":"p","reset":"r","slots":[{"id":1}]}`, func(t *testing.T, c *pool.Config) {
			if c.Provision != "p" || c.Reset != "r" {
				t.Errorf("provision %q reset %q", c.Provision, c.Reset)
			}
		}},
		{"numbers", `{"ttlMinutes":0.5,"waiterStaleMs":1500,"movingAvgSeedMs":2000,"slots":[{"id":1}]}`, func(t *testing.T, c *pool.Config) {
			if c.TTLMinutes != 0.5 || c.WaiterStale != 1500*time.Millisecond || c.MovingAvgSeed != 2*time.Second {
				t.Errorf("ttl %v stale %v seed %v", c.TTLMinutes, c.WaiterStale, c.MovingAvgSeed)
			}
		}},
		{"relative cwd", `{"cwd":"sub/dir","slots":[{"id":1}]}`, func(t *testing.T, c *pool.Config) {
			if want := filepath.Join(base, "sub", "dir"); c.Dir != want {
				t.Errorf("Dir = %q, want %q", c.Dir, want)
			}
		}},
		{"absolute cwd", `{"cwd":"/srv/x/../y","slots":[{"id":1}]}`, func(t *testing.T, c *pool.Config) {
			if c.Dir != "/srv/y" {
				t.Errorf("Dir = %q, want /srv/y", c.Dir)
			}
		}},
		{"explicit slot kind", `{"slots":[{"id":1,"kind":"db-main"}]}`, func(t *testing.T, c *pool.Config) {
			if c.Slots[0].Kind != "db-main" {
				t.Errorf("kind = %q", c.Slots[0].Kind)
			}
			if _, ok := c.Slots[0].Attributes["kind"]; ok {
				t.Error("kind must not be an attribute")
			}
		}},
		{"attributes keep JSON types", `{"slots":[{"id":1,"port":3000,"name":"x","tags":["a"],"ports":{"api":1},"on":true,"none":null}]}`,
			func(t *testing.T, c *pool.Config) {
				want := map[string]any{"port": json.Number("3000"), "name": "x", "tags": []any{"a"},
					"ports": map[string]any{"api": json.Number("1")}, "on": true, "none": nil}
				if !reflect.DeepEqual(c.Slots[0].Attributes, want) {
					t.Errorf("attributes = %#v", c.Slots[0].Attributes)
				}
			}},
		{"number ids are canonical", `{"slots":[{"id":1.0},{"id":2.50},{"id":"007"}]}`, func(t *testing.T, c *pool.Config) {
			var ids, kinds []string
			for _, s := range c.Slots {
				ids, kinds = append(ids, s.ID), append(kinds, s.Kind)
			}
			if !reflect.DeepEqual(ids, []string{"1", "2.5", "007"}) || !reflect.DeepEqual(kinds, []string{"slot-1", "slot-2.5", "slot-007"}) {
				t.Errorf("ids %q kinds %q", ids, kinds)
			}
			if c.Slots[0].RawID != json.Number("1.0") {
				t.Errorf("RawID = %#v, want the number as written", c.Slots[0].RawID)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := pool.Parse([]byte(tc.json), base)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			tc.check(t, c)
		})
	}
}

// TestConfigErrorsSayWhere: a mistake in a pool file names the file, the
// line and column of what is wrong, and its JSON path, as a gate file's
// do (g1.yaml:4:5: …); a syntax error names the value it broke, and a
// mistyped field the one meant. Before, a missing comma was "$: not a
// JSON object: invalid character '{' after array element", and ttlMinute
// listed twenty fields without saying which.
func TestConfigErrorsSayWhere(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text, want string
	}{
		{"a missing comma", "{\n  \"slots\": [\n    { \"id\": 1 }\n    { \"id\": 2 }\n  ]\n}\n",
			`:4:5: $.slots[1]: not JSON: invalid character '{' after array element`},
		{"a trailing comma", "{\n  \"ttlMinutes\": 5,\n}\n",
			`:3:1: $: not JSON: invalid character '}' looking for beginning of object key string`},
		{"cut short", "{\n  \"slots\": [ { \"id\": 1 }",
			`:2:25: $.slots[1]: not JSON: the text ends before the value does`},
		{"an array", "[ { \"id\": 1 } ]\n", `:1:1: $: must be a JSON object of pool fields (such as {"slots": [...]}), not an array`},
		{"a mistyped field", "{\n  \"slots\": [ { \"id\": 1 } ],\n  \"ttlMinute\": 5\n}\n",
			`:3:3: $.ttlMinute: unknown field, did you mean "ttlMinutes"?`},
		{"a field in another case", "{ \"slots\": [ { \"id\": 1 } ], \"WaiterStaleMs\": 5 }",
			`:1:29: $.WaiterStaleMs: unknown field, did you mean "waiterStaleMs"?`},
		{"the first of two unknown fields", "{ \"zzz\": 1, \"aaa\": 2, \"slots\": [ { \"id\": 1 } ] }",
			`:1:3: $.zzz: unknown field (known: name, kindPrefix`},
		{"a wrong type", "{\n  \"slots\": [ { \"id\": 1 } ],\n  \"ttlMinutes\": \"30\"\n}\n",
			`:3:3: $.ttlMinutes: must be a positive number`},
		{"a slot", "{\n  \"slots\": [\n    { \"id\": 1 },\n    { \"id\": 1 }\n  ]\n}\n",
			`:4:7: $.slots[1].id: duplicate slot id "1" (also $.slots[0])`},
		{"a template of one slot", "{\n  \"grantEnv\": {\n    \"DB\": \"{db}\"\n  },\n  \"slots\": [ { \"id\": 1, \"db\": \"a\" }, { \"id\": 2 } ]\n}\n",
			`:3:5: $.grantEnv.DB: placeholder {db} names no attribute of slot 2 (slot at $.slots[1])`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json")
			if err := os.WriteFile(file, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := pool.LoadFile(file)
			want := "pool: invalid pool file " + file + tc.want
			if err == nil || !strings.HasPrefix(err.Error(), want) || !errors.Is(err, pool.ErrConfig) {
				t.Fatalf("LoadFile = %v\nwant %s", err, want)
			}
			var ce *pool.ConfigError
			if !errors.As(err, &ce) || ce.Line == 0 {
				t.Errorf("%v: no *ConfigError with a line", err)
			}
		})
	}
	// Parse alone has no file name, but the place all the same.
	_, err := pool.Parse([]byte("{\n  \"ttlMinute\": 5 }"), dir)
	if want := `pool: invalid pool file: 2:3: $.ttlMinute: unknown field, did you mean "ttlMinutes"?`; err == nil || err.Error() != want {
		t.Errorf("Parse = %v, want %s", err, want)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		json string
		want []string // substrings of the message
	}{
		{"not JSON", `{`, []string{"$"}},
		{"not an object", `[1]`, []string{"$"}},
		{"null", `null`, []string{"$"}},
		{"trailing data", `{"slots":[{"id":1}]} {}`, []string{"$", "trailing"}},
		{"unknown top-level field", `{"foo":1,"slots":[{"id":1}]}`, []string{"$.foo", "unknown field"}},
		{"field names are case sensitive", `{"Slots":[{"id":1}]}`, []string{"$.Slots"}},
		{"slots missing", `{}`, []string{"$.slots"}},
		{"slots empty", `{"slots":[]}`, []string{"$.slots"}},
		{"slots not an array", `{"slots":{"id":1}}`, []string{"$.slots"}},
		{"slot not an object", `{"slots":[{"id":1},3]}`, []string{"$.slots[1]", "object"}},
		{"slot null", `{"slots":[null]}`, []string{"$.slots[0]"}},
		{"id missing", `{"slots":[{"port":1}]}`, []string{"$.slots[0].id"}},
		{"id bool", `{"slots":[{"id":true}]}`, []string{"$.slots[0].id", "string or a number"}},
		{"id null", `{"slots":[{"id":null}]}`, []string{"$.slots[0].id"}},
		{"id object", `{"slots":[{"id":{"a":1}}]}`, []string{"$.slots[0].id"}},
		{"id empty", `{"slots":[{"id":""}]}`, []string{"$.slots[0].id", "empty"}},
		{"duplicate ids", `{"slots":[{"id":1},{"id":1}]}`, []string{"$.slots[1].id", "duplicate", "$.slots[0]"}},
		{"duplicate ids string and number", `{"slots":[{"id":"1"},{"id":1.0}]}`, []string{"$.slots[1].id", "duplicate"}},
		{"id makes an invalid kind", `{"slots":[{"id":"A B"}]}`, []string{"$.slots[0]", "slot-A B"}},
		{"id with a slash", `{"slots":[{"id":"../x"}]}`, []string{"$.slots[0]", "slot-../x"}},
		{"explicit kind invalid", `{"slots":[{"id":1,"kind":"Bad Kind"}]}`, []string{"$.slots[0]", "Bad Kind"}},
		{"explicit kind not a string", `{"slots":[{"id":1,"kind":7}]}`, []string{"$.slots[0].kind"}},
		{"duplicate kinds", `{"slots":[{"id":1,"kind":"k"},{"id":2,"kind":"k"}]}`, []string{"$.slots[1]", `"k"`, "$.slots[0]"}},
		{"prefix and kind collide", `{"slots":[{"id":1},{"id":2,"kind":"slot-1"}]}`, []string{"$.slots[1]", "slot-1"}},
		{"slot kind equals the queue lock kind", `{"slots":[{"id":1,"kind":"pool-queue"}]}`, []string{"$.slots[0]", "queue lock"}},
		{"slot kind equals a custom queue lock kind", `{"queueLockKind":"slot-1","slots":[{"id":1}]}`, []string{"$.slots[0]", "queue lock"}},
		{"bad kindPrefix", `{"kindPrefix":"Slot-","slots":[{"id":1}]}`, []string{"$.slots[0]", "Slot-1"}},
		{"grantEnv bad variable name", `{"grantEnv":{"1X":"a"},"slots":[{"id":1}]}`, []string{"$.grantEnv.1X", "variable name"}},
		{"grantEnv variable with dash", `{"grantEnv":{"A-B":"a"},"slots":[{"id":1}]}`, []string{"$.grantEnv.A-B"}},
		{"grantEnv not an object", `{"grantEnv":["a"],"slots":[{"id":1}]}`, []string{"$.grantEnv"}},
		{"grantEnv null", `{"grantEnv":null,"slots":[{"id":1}]}`, []string{"$.grantEnv"}},
		{"grantEnv value not a string", `{"grantEnv":{"X":1},"slots":[{"id":1}]}`, []string{"$.grantEnv"}},
		{"grantEnv missing attribute", `{"grantEnv":{"X":"port {nope}"},"slots":[{"id":1}]}`, []string{"$.grantEnv.X", "{nope}", "$.slots[0]"}},
		{"grantEnv whole placeholder missing", `{"grantEnv":{"X":"{ports.db}"},"slots":[{"id":1,"ports":{"api":1}}]}`, []string{"$.grantEnv.X", "{ports.db}"}},
		{"grantEnv missing on the second slot only", `{"grantEnv":{"X":"{db}"},"slots":[{"id":1,"db":"a"},{"id":2}]}`, []string{"$.grantEnv.X", "{db}", "$.slots[1]"}},
		{"grantEnv path through a scalar", `{"grantEnv":{"X":"{db.name}"},"slots":[{"id":1,"db":"a"}]}`, []string{"$.grantEnv.X", "{db.name}"}},
		{"grantFields reserved token", `{"grantFields":{"token":"x"},"slots":[{"id":1}]}`, []string{"$.grantFields.token", "collides"}},
		{"grantFields reserved request_id", `{"grantFields":{"request_id":"x"},"slots":[{"id":1}]}`, []string{"$.grantFields.request_id"}},
		{"grantFields reserved slot", `{"grantFields":{"slot":"{id}"},"slots":[{"id":1}]}`, []string{"$.grantFields.slot"}},
		{"grantFields not an object", `{"grantFields":"x","slots":[{"id":1}]}`, []string{"$.grantFields"}},
		{"grantFields missing attribute", `{"grantFields":{"p":"{port}"},"slots":[{"id":1}]}`, []string{"$.grantFields.p", "{port}"}},
		{"ttlMinutes zero", `{"ttlMinutes":0,"slots":[{"id":1}]}`, []string{"$.ttlMinutes", "positive"}},
		{"ttlMinutes negative", `{"ttlMinutes":-1,"slots":[{"id":1}]}`, []string{"$.ttlMinutes"}},
		{"ttlMinutes string", `{"ttlMinutes":"30","slots":[{"id":1}]}`, []string{"$.ttlMinutes"}},
		{"ttlMinutes too large", `{"ttlMinutes":1e9,"slots":[{"id":1}]}`, []string{"$.ttlMinutes"}},
		{"waiterStaleMs zero", `{"waiterStaleMs":0,"slots":[{"id":1}]}`, []string{"$.waiterStaleMs"}},
		{"waiterStaleMs negative", `{"waiterStaleMs":-5,"slots":[{"id":1}]}`, []string{"$.waiterStaleMs"}},
		{"movingAvgSeedMs zero", `{"movingAvgSeedMs":0,"slots":[{"id":1}]}`, []string{"$.movingAvgSeedMs"}},
		{"provision not a string", `{"provision":["a"],"slots":[{"id":1}]}`, []string{"$.provision", "string"}},
		{"health not a string", `{"health":1,"slots":[{"id":1}]}`, []string{"$.health"}},
		{"nudgeCommand not a string", `{"nudgeCommand":true,"slots":[{"id":1}]}`, []string{"$.nudgeCommand"}},
		{"cwd not a string", `{"cwd":1,"slots":[{"id":1}]}`, []string{"$.cwd"}},
		{"invalid name", `{"name":"My Pool","slots":[{"id":1}]}`, []string{"$.name", "My Pool"}},
		{"name with slash", `{"name":"../up","slots":[{"id":1}]}`, []string{"$.name"}},
		{"invalid queueLockKind", `{"queueLockKind":"Q","slots":[{"id":1}]}`, []string{"$.queueLockKind"}},
		{"invalid shellPrefix", `{"shellPrefix":"1X","slots":[{"id":1}]}`, []string{"$.shellPrefix"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := pool.Parse([]byte(tc.json), t.TempDir())
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", c)
			}
			if !errors.Is(err, pool.ErrConfig) {
				t.Errorf("error %q does not match ErrConfig", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestLoadFileErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	t.Run("missing file", func(t *testing.T) {
		_, err := pool.LoadFile(filepath.Join(dir, "nope.json"))
		if !errors.Is(err, pool.ErrConfig) || !strings.Contains(err.Error(), "nope.json") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("invalid file names itself and the path", func(t *testing.T) {
		file := filepath.Join(dir, "bad.json")
		if err := os.WriteFile(file, []byte(`{"slots":[{"id":1},{"id":1}]}`), 0o666); err != nil {
			t.Fatal(err)
		}
		_, err := pool.LoadFile(file)
		if !errors.Is(err, pool.ErrConfig) || !strings.Contains(err.Error(), "bad.json") || !strings.Contains(err.Error(), "$.slots[1].id") {
			t.Errorf("err = %v", err)
		}
	})
}

// TestParseHugeDurations: waiterStaleMs and movingAvgSeedMs are accepted
// with no upper bound and converted with time.Duration(v * 1e6), which
// overflows int64 for v > ~9.2e12 ms: the result is negative, so a
// "never drop waiters" setting drops every waiter at once and makes the
// waiter poll interval negative.
func TestParseHugeDurations(t *testing.T) {
	t.Parallel()
	for _, field := range []string{"waiterStaleMs", "movingAvgSeedMs"} {
		t.Run(field, func(t *testing.T) {
			c, err := pool.Parse([]byte(`{"`+field+`":1e13,"slots":[{"id":1}]}`), t.TempDir())
			if err != nil {
				return // refusing the value is fine
			}
			if c.WaiterStale <= 0 || c.MovingAvgSeed <= 0 {
				t.Errorf("%s 1e13 accepted but WaiterStale=%v MovingAvgSeed=%v",
					field, c.WaiterStale, c.MovingAvgSeed)
			}
		})
	}
}

func TestTemplates(t *testing.T) {
	t.Parallel()
	const slots = `"slots":[{"id":1,"ports":{"api":3000,"web":3001},"db":"acme_test_1","tags":["a","b"],"on":true,"none":null,"frac":1.50},
	                         {"id":"two","kind":"custom-kind","ports":{"api":3100,"web":3101},"db":"acme_test_2","tags":[],"on":false,"none":null,"frac":2}]`
	c, err := pool.Parse([]byte(`{
	  "grantEnv": {
	    "APP_PORT": "{ports.api}",
	    "DATABASE_URL": "postgresql://u@localhost:5432/{db}",
	    "PORTS": "{ports}",
	    "PORTS_TEXT": "ports={ports}",
	    "SLOT": "{id}",
	    "KIND": "{kind}",
	    "TAGS": "{tags}",
	    "ON": "{on}",
	    "NONE": "{none}",
	    "FRAC": "{frac}",
	    "LITERAL": "no placeholders, {not a placeholder}",
	    "TWO": "{ports.api}-{ports.web}"
	  },
	  "grantFields": {
	    "ports": "{ports}",
	    "apiPort": "{ports.api}",
	    "apiText": "port {ports.api}",
	    "slotId": "{id}",
	    "literal": 42,
	    "obj": {"x": [1, 2]}
	  },
	  `+slots+`}`), t.TempDir())
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	env1, fields1, err := c.GrantPartsForTest(c.Slots[0])
	if err != nil {
		t.Fatal(err)
	}
	env2, fields2, err := c.GrantPartsForTest(c.Slots[1])
	if err != nil {
		t.Fatal(err)
	}
	envTests := []struct {
		name string
		got  string
		want string
	}{
		{"dotted path", env1["APP_PORT"], "3000"},
		{"text interpolation", env1["DATABASE_URL"], "postgresql://u@localhost:5432/acme_test_1"},
		{"whole object as env is compact JSON", env1["PORTS"], `{"api":3000,"web":3001}`},
		{"object inside text is compact JSON", env1["PORTS_TEXT"], `ports={"api":3000,"web":3001}`},
		{"numeric id", env1["SLOT"], "1"},
		{"string id", env2["SLOT"], "two"},
		{"default kind", env1["KIND"], "slot-1"},
		{"explicit kind", env2["KIND"], "custom-kind"},
		{"array", env1["TAGS"], `["a","b"]`},
		{"empty array", env2["TAGS"], `[]`},
		{"bool true", env1["ON"], "true"},
		{"bool false", env2["ON"], "false"},
		{"null", env1["NONE"], ""},
		{"number as written", env1["FRAC"], "1.50"},
		{"non-placeholder braces kept", env1["LITERAL"], "no placeholders, {not a placeholder}"},
		{"two placeholders", env2["TWO"], "3100-3101"},
	}
	for _, tc := range envTests {
		t.Run("env/"+tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
	fieldTests := []struct {
		name string
		got  any
		want any
	}{
		{"whole placeholder keeps the object", fields1["ports"], map[string]any{"api": json.Number("3000"), "web": json.Number("3001")}},
		{"whole placeholder keeps the number", fields1["apiPort"], json.Number("3000")},
		{"text template is a string", fields1["apiText"], "port 3000"},
		{"id keeps its JSON type (number)", fields1["slotId"], json.Number("1")},
		{"id keeps its JSON type (string)", fields2["slotId"], "two"},
		{"literal number", fields1["literal"], json.Number("42")},
		{"literal object", fields2["obj"], map[string]any{"x": []any{json.Number("1"), json.Number("2")}}},
	}
	for _, tc := range fieldTests {
		t.Run("fields/"+tc.name, func(t *testing.T) {
			if !reflect.DeepEqual(tc.got, tc.want) {
				t.Errorf("got %#v, want %#v", tc.got, tc.want)
			}
		})
	}
	t.Run("fields/marshal", func(t *testing.T) {
		b, err := json.Marshal(fields1["ports"])
		if err != nil || string(b) != `{"api":3000,"web":3001}` {
			t.Errorf("ports marshal to %s (%v)", b, err)
		}
	})
}

// TestTemplateObjectHTMLChars: text interpolation of an object renders it
// with json.Marshal, which escapes <, > and & as \u003c…, unlike the
// POOL_SLOT_* env (provision.envValue) and JavaScript's JSON.stringify.
func TestTemplateObjectHTMLChars(t *testing.T) {
	t.Parallel()
	c, err := pool.Parse([]byte(`{"grantEnv":{"Q":"{q}","Q_TEXT":"q={q}","RAW":"{s}"},
	  "slots":[{"id":1,"q":{"url":"http://h/?a=1&b=<2>"},"s":"a&b<c>"}]}`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env, _, err := c.GrantPartsForTest(c.Slots[0])
	if err != nil {
		t.Fatal(err)
	}
	if env["RAW"] != "a&b<c>" {
		t.Errorf("RAW = %q", env["RAW"])
	}
	want := `{"url":"http://h/?a=1&b=<2>"}`
	if env["Q"] != want || env["Q_TEXT"] != "q="+want {
		t.Errorf("Q = %q, Q_TEXT = %q, want %q", env["Q"], env["Q_TEXT"], want)
	}
}

func TestDefaultGrantEnv(t *testing.T) {
	t.Parallel()
	c, err := pool.Parse([]byte(`{"slots":[{"id":7,"ports":{"api":3000},"db":"d","tags":[1,2],"cache-db":3}]}`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env, fields, err := c.GrantPartsForTest(c.Slots[0])
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"POOL_SLOT_ID":        "7",
		"POOL_SLOT_KIND":      "slot-7",
		"POOL_SLOT_PORTS_API": "3000",
		"POOL_SLOT_DB":        "d",
		"POOL_SLOT_TAGS":      "[1,2]",
		"POOL_SLOT_CACHE_DB":  "3",
	}
	if !reflect.DeepEqual(env, want) {
		t.Errorf("env = %v\nwant  %v", env, want)
	}
	if _, ok := env["POOL_ACTION"]; ok {
		t.Error("the grant env must not carry POOL_ACTION")
	}
	if len(fields) != 0 {
		t.Errorf("fields = %v, want none", fields)
	}
}

func TestSlotByID(t *testing.T) {
	t.Parallel()
	c, err := pool.Parse([]byte(`{"slots":[{"id":1},{"id":"02"},{"id":"db"},{"id":2.5},{"id":10}]}`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		query string
		want  string // slot ID, "" for not found
	}{
		{"1", "1"},
		{"01", "1"},  // a numeric id matches however it is written
		{"1.0", "1"}, // …
		{"1e0", "1"}, // …
		{"+1", "1"},  // …
		{"02", "02"}, // a string id matches exactly
		{"2", ""},    // and only exactly: "02" is a string
		{"db", "db"},
		{"DB", ""},
		{"2.5", "2.5"},
		{"2.50", "2.5"},
		{"10", "10"},
		{"010", "10"},
		{"1 ", ""},
		{"", ""},
		{"NaN", ""},
		{"Inf", ""},
		{"0x1", ""},
		{"3", ""},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			s, err := c.SlotByID(tc.query)
			if tc.want == "" {
				if !errors.Is(err, pool.ErrInvalid) {
					t.Fatalf("SlotByID(%q) = %v, %v; want ErrInvalid", tc.query, s, err)
				}
				if !strings.Contains(err.Error(), "1, 02, db, 2.5, 10") {
					t.Errorf("error %q does not list the slots", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("SlotByID(%q): %v", tc.query, err)
			}
			if s.ID != tc.want {
				t.Errorf("SlotByID(%q) = slot %q, want %q", tc.query, s.ID, tc.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{"slots":[{"id":1}]}`,
		twoSlotPool,
		oneSlotPool,
		`{"grantEnv":{"A":"{ports.api}"},"grantFields":{"p":"{ports}"},"slots":[{"id":"x","ports":{"api":1}}]}`,
		`{"name":"n","kindPrefix":"k-","queueLockKind":"k-1","slots":[{"id":1}]}`,
		`{"ttlMinutes":1e-300,"waiterStaleMs":1e300,"slots":[{"id":1e400}]}`,
		`{"slots":[{"id":-0},{"id":0}]}`,
		`{"grantEnv":{"A":"{a.b.c.d}"},"slots":[{"id":1,"a":{"b":{"c":{"d":[null]}}}}]}`,
		`{"slots":[{"id":"1"},{"id":1}]}`,
		`{"slots":[1]}`, `[]`, `null`, ``, `{"slots":[{}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := pool.Parse(data, "/base")
		if err != nil {
			if !errors.Is(err, pool.ErrConfig) {
				t.Fatalf("error %v does not match ErrConfig", err)
			}
			return
		}
		if len(c.Slots) == 0 {
			t.Fatal("valid config without slots")
		}
		kinds := map[string]bool{c.QueueLockKind: true}
		for _, s := range c.Slots {
			if kinds[s.Kind] {
				t.Fatalf("kind %q used twice", s.Kind)
			}
			kinds[s.Kind] = true
			got, err := c.SlotByID(s.ID)
			if err != nil || got != s {
				t.Fatalf("SlotByID(%q) = %v, %v", s.ID, got, err)
			}
			env, _, err := c.GrantPartsForTest(s)
			if err != nil {
				t.Fatalf("grantParts after a successful Parse: %v", err)
			}
			if _, err := pool.ShellExports(env, c.ShellPrefix, s.ID, "tok", "owner"); err != nil && !strings.Contains(err.Error(), "NUL") {
				t.Fatalf("ShellExports: %v", err)
			}
		}
	})
}

// TestConfigRanges: every numeric field of a pool file has a range, and a
// value outside it is refused with its JSON path before anything runs.
func TestConfigRanges(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, field, want string }{
		{"denormal ttl", `"ttlMinutes":5e-324`, "$.ttlMinutes"},
		{"ttl under the minimum", `"ttlMinutes":0.0005`, "$.ttlMinutes"},
		{"ttl over the maximum", `"ttlMinutes":527041`, "$.ttlMinutes"},
		{"waiterStaleMs under the floor", `"waiterStaleMs":50`, "$.waiterStaleMs"},
		{"movingAvgSeedMs over the maximum", `"movingAvgSeedMs":1e300`, "$.movingAvgSeedMs"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := pool.Parse([]byte(`{`+tt.field+`,"slots":[{"id":1}]}`), t.TempDir())
			if !errors.Is(err, pool.ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse = %v, want ErrConfig naming %s", err, tt.want)
			}
		})
	}
	for _, ok := range []string{`"ttlMinutes":0.001`, `"ttlMinutes":527040`, `"waiterStaleMs":100`} {
		if _, err := pool.Parse([]byte(`{`+ok+`,"slots":[{"id":1}]}`), t.TempDir()); err != nil {
			t.Errorf("Parse(%s) = %v, want it accepted", ok, err)
		}
	}
}
