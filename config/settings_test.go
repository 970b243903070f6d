package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// samples are a value of each kind that differs from every default.
var samples = map[Kind]string{
	KindString: "x-1", KindBool: "true", KindInt: "7", KindInt64: "8", KindDuration: "1m30s",
	KindList: "a,b", KindPartitions: "0,3", KindHubSources: "us=us,eu=eu/E", KindDataCenters: "dc1=1,dc2=3",
}

// yamlKeys returns the dotted YAML keys of c's leaves, with their values.
func yamlKeys(t *testing.T, c Config) map[string]any {
	t.Helper()
	raw, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if err := yaml.Unmarshal(raw, &tree); err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok && k != "data_centers" {
				walk(prefix+k+".", sub)
				continue
			}
			out[prefix+k] = v
		}
	}
	walk("", tree)
	return out
}

// TestSettingsCoverTheSchema: every YAML key of a Config has one setting,
// and each setting's field is the one of its key: setting it changes that
// key and no other.
func TestSettingsCoverTheSchema(t *testing.T) {
	base := yamlKeys(t, Default())
	var keys []string
	for _, s := range Settings() {
		keys = append(keys, s.Key)
		c := Default()
		v := samples[s.Kind()]
		if err := s.Set(&c, "TEST", v); err != nil {
			t.Fatalf("%s: Set(%q): %v", s.Key, v, err)
		}
		if got := s.Get(&c); got != v {
			t.Errorf("%s: Get after Set(%q) = %q", s.Key, v, got)
		}
		for k, after := range yamlKeys(t, c) {
			if changed := !reflect.DeepEqual(after, base[k]); changed != (k == s.Key) {
				t.Errorf("setting %s to %q: YAML key %s changed %v", s.Key, v, k, changed)
			}
		}
	}
	var schema []string
	for k := range base {
		schema = append(schema, k)
	}
	slices.Sort(schema)
	slices.Sort(keys)
	if !slices.Equal(keys, schema) {
		t.Errorf("setting keys\n%v\nwant the YAML schema's\n%v", keys, schema)
	}
}

// TestSettingNames: an environment variable names one setting, a flag one
// setting of a command, and every setting has a meaning.
func TestSettingNames(t *testing.T) {
	env := map[string]string{}
	flags := map[string]string{}
	for _, s := range Settings() {
		if s.Meaning == "" {
			t.Errorf("%s has no meaning", s.Key)
		}
		if s.Env != "" {
			if !strings.HasPrefix(s.Env, "EDGECOUNT_") {
				t.Errorf("%s: env %s is not EDGECOUNT_*", s.Key, s.Env)
			}
			if other, ok := env[s.Env]; ok {
				t.Errorf("env %s names %s and %s", s.Env, other, s.Key)
			}
			env[s.Env] = s.Key
		}
		if (s.Flag == "") != (len(s.FlagRoles) == 0) {
			t.Errorf("%s: flag %q for commands %v", s.Key, s.Flag, s.FlagRoles)
		}
		for _, r := range s.FlagRoles {
			name := r.String() + " --" + s.Flag
			if other, ok := flags[name]; ok {
				t.Errorf("%s names %s and %s", name, other, s.Key)
			}
			flags[name] = s.Key
		}
	}
}

// TestSettingErrors: a bad value is named by its source, with the texts
// the commands have always given.
func TestSettingErrors(t *testing.T) {
	tests := []struct {
		key, name, value, want string
	}{
		{"rollup.owned", "owned", "1,x, y", "owned: \"x\" is not a number\nowned: \" y\" is not a number"},
		{"nats.hub.sources", "nats-hub-sources", "us", `nats-hub-sources: hub source "us": want region=domain or region=domain/stream`},
		{"agent.flush_interval", "EDGECOUNT_FLUSH_INTERVAL", "soon", `EDGECOUNT_FLUSH_INTERVAL: time: invalid duration "soon"`},
		{"partitions", "EDGECOUNT_PARTITIONS", "x", `EDGECOUNT_PARTITIONS: strconv.Atoi: parsing "x": invalid syntax`},
		{"agent.log_max_bytes", "EDGECOUNT_LOG_MAX_BYTES", "lots", `EDGECOUNT_LOG_MAX_BYTES: strconv.ParseInt: parsing "lots": invalid syntax`},
		{"cassandra.data_centers", "TEST", "dc1", `TEST: "dc1": want dc=factor`},
	}
	for _, tt := range tests {
		i := slices.IndexFunc(Settings(), func(s Setting) bool { return s.Key == tt.key })
		c := Default()
		err := Settings()[i].Set(&c, tt.name, tt.value)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s: Set(%q) error = %v, want %q", tt.key, tt.value, err, tt.want)
		}
	}
	c := Default()
	i := slices.IndexFunc(Settings(), func(s Setting) bool { return s.Key == "rollup.owned" })
	_ = Settings()[i].Set(&c, "owned", "1,x,2")
	if !slices.Equal(c.Rollup.Owned, []int{1, 2}) {
		t.Errorf("owned 1,x,2 → %v; want the good partitions, [1 2]", c.Rollup.Owned)
	}
}
