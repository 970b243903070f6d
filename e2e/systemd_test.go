package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgecount/edgecount/config"
	"github.com/edgecount/edgecount/internal/testenv"
)

// systemdUnit is a unit in deploy/systemd and what the test holds it to.
type systemdUnit struct {
	file string      // the unit's file name in deploy/systemd
	cmd  string      // the command it starts, under cmd/
	bin  string      // where deploy/systemd/README.md installs that command
	role config.Role // the command's role in the settings table
	env  string      // the example of its EnvironmentFile, in deploy/systemd
	// maxExposure bounds systemd-analyze security's overall exposure
	// level (0 best, 10 worst): a change that loosens the sandbox past it
	// fails until the bound is raised on purpose.
	maxExposure float64
}

var systemdUnits = []systemdUnit{
	// Measured 1.3 with systemd 252 (Debian 12).
	{file: "edgecount-agent.service", cmd: "edge-agent", bin: "/usr/local/bin/edgecount-agent", role: config.RoleAgent, env: "agent.env", maxExposure: 1.4},
	// Measured 1.3 with systemd 252 (Debian 12).
	{file: "edgecount-rollup.service", cmd: "rollup", bin: "/usr/local/bin/edgecount-rollup", role: config.RoleRollup, env: "rollup.env", maxExposure: 1.4},
}

// systemdDir is where the units and their companions live.
const systemdDir = "../deploy/systemd"

// unitRequires are directives every unit must have with these values: what
// the security score does not weigh (start, stop, reload, restart) and the
// identity the README's install steps rely on.
var unitRequires = map[string]string{
	"Type":                "exec", // the binaries do not speak sd_notify
	"Restart":             "on-failure",
	"ExecReload":          "/bin/kill -HUP $MAINPID",
	"KillSignal":          "SIGTERM",
	"DynamicUser":         "yes",
	"SupplementaryGroups": "edgecount",
	"ProtectSystem":       "strict",
	"UMask":               "0077",
}

// needSystemd returns the path of a tool of Debian's systemd package; when
// it is missing the test fails under CI and is skipped otherwise.
func needSystemd(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		testenv.Unavailable(t, fmt.Sprintf("%s: %v; install it with apt-get install systemd (or scripts/systemd.sh install)", name, err))
	}
	return p
}

// TestSystemdUnits checks each unit in deploy/systemd against systemd and
// against the binary it starts: systemd-analyze verify finds nothing to
// say about it; its exposure score stays within its bound; the binary
// accepts every flag of its ExecStart; --data is the unit's state
// directory (the one writable place under ProtectSystem=strict); its
// example environment file names only settings that exist, and with the
// flags over a region file makes a configuration the command accepts;
// systemd waits for the process's own graceful stop before it kills.
func TestSystemdUnits(t *testing.T) {
	analyze := needSystemd(t, "systemd-analyze")
	agentBin, rollupBin := binaries(t)
	bins := map[string]string{"edge-agent": agentBin, "rollup": rollupBin}
	for _, u := range systemdUnits {
		t.Run(u.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(systemdDir, u.file))
			if err != nil {
				t.Fatal(err)
			}
			unit := parseUnit(t, string(raw))
			for key, want := range unitRequires {
				if got := unit.get("Service", key); got != want {
					t.Errorf("%s=%q; want %q", key, got, want)
				}
			}
			start := strings.Fields(unit.get("Service", "ExecStart"))
			if len(start) == 0 || start[0] != u.bin {
				t.Fatalf("ExecStart=%s; want %s, where the README installs %s", strings.Join(start, " "), u.bin, u.cmd)
			}
			// systemd-analyze verify checks that ExecStart's binary
			// exists: verify a copy that starts the one just built.
			copyPath := filepath.Join(t.TempDir(), u.file)
			rewritten := strings.Replace(string(raw), "ExecStart="+start[0]+" ", "ExecStart="+bins[u.cmd]+" ", 1)
			if rewritten == string(raw) {
				t.Fatalf("cannot point ExecStart=%s at the built binary", start[0])
			}
			if err := os.WriteFile(copyPath, []byte(rewritten), 0o644); err != nil {
				t.Fatal(err)
			}
			checkVerify(t, analyze, copyPath)
			checkExposure(t, analyze, copyPath, u)
			checkFlags(t, bins[u.cmd], u, start[1:])
			checkDataDir(t, unit, start[1:])
			checkExampleEnv(t, unit, u, start[1:])
			checkStopTimeout(t, unit)
		})
	}
}

// checkVerify runs systemd-analyze verify on the unit at path, which must
// exit 0 and say nothing: it exits 0 on warnings too.
func checkVerify(t *testing.T, analyze, path string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(analyze, "verify", path)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil || stderr.Len() > 0 {
		t.Errorf("systemd-analyze verify %s: %s; want exit 0 and nothing on stderr\nstderr:\n%s\nstdout:\n%s",
			filepath.Base(path), cmd.ProcessState, stderr.String(), stdout.String())
	}
}

// exposureLine is systemd-analyze security's verdict line.
var exposureLine = regexp.MustCompile(`Overall exposure level for \S+: ([0-9]+(?:\.[0-9]+)?)`)

// checkExposure runs systemd-analyze security on the unit at path, offline,
// and holds its overall exposure level to the unit's bound.
func checkExposure(t *testing.T, analyze, path string, u systemdUnit) {
	t.Helper()
	out, err := exec.Command(analyze, "security", "--offline=yes", "--no-pager", path).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security --offline=yes %s: %v\n%s", u.file, err, out)
	}
	m := exposureLine.FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security %s: no overall exposure level in:\n%s", u.file, out)
	}
	score, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	if score > u.maxExposure {
		t.Errorf("exposure level %.1f; want at most %.1f (what each directive costs:\n%s)", score, u.maxExposure, out)
	}
	t.Logf("exposure level %.1f (bound %.1f)", score, u.maxExposure)
}

// checkFlags runs the binary with ExecStart's arguments and --version: the
// command parses every flag before --version returns, so a flag it does not
// have, or a stray argument, fails the run (exit 1).
func checkFlags(t *testing.T, bin string, u systemdUnit, args []string) {
	t.Helper()
	expanded := make([]string, len(args))
	for i, a := range args {
		expanded[i] = expandSpecifiers(t, a)
	}
	cmd := exec.Command(bin, append(expanded, "--version")...)
	cmd.Env = []string{} // --version reads no variable, and none leaks in
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Errorf("%s %s --version: %v\n%s", u.cmd, strings.Join(expanded, " "), err, stderr.String())
		return
	}
	if !strings.HasPrefix(stdout.String(), u.cmd+" ") {
		t.Errorf("%s %s --version printed %q; want its build line", u.cmd, strings.Join(expanded, " "), stdout.String())
	}
}

// specifier matches a unit specifier (%S) or an escaped % (%%).
var specifier = regexp.MustCompile(`%.`)

// expandSpecifiers replaces the specifiers the units use in ExecStart with
// what they stand for on a system service: %S is /var/lib. Any other
// fails the test, so that a new one is given a meaning here first.
func expandSpecifiers(t *testing.T, s string) string {
	t.Helper()
	return specifier.ReplaceAllStringFunc(s, func(m string) string {
		switch m {
		case "%S":
			return "/var/lib"
		case "%%":
			return "%"
		}
		t.Errorf("ExecStart argument %q: specifier %s has no meaning in this test; add it to expandSpecifiers", s, m)
		return m
	})
}

// flagValue returns the value of --name (or -name) in args, "--name v" or
// "--name=v", and whether it is there.
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		for _, dashes := range []string{"-", "--"} {
			if a == dashes+name && i+1 < len(args) {
				return args[i+1], true
			}
			if v, ok := strings.CutPrefix(a, dashes+name+"="); ok {
				return v, true
			}
		}
	}
	return "", false
}

// checkDataDir: ExecStart gives --data, and it is one of the unit's state
// directories (%S/NAME for StateDirectory=NAME): under ProtectSystem=strict
// any other is read-only, and the process would fail at its first write.
func checkDataDir(t *testing.T, unit unitFile, args []string) {
	t.Helper()
	data, ok := flagValue(args, "data")
	if !ok {
		t.Errorf("ExecStart has no --data; the process would write under / (read-only)")
		return
	}
	states := strings.Fields(unit.get("Service", "StateDirectory"))
	for _, s := range states {
		if data == "%S/"+s {
			return
		}
	}
	t.Errorf("--data %s is not a state directory of the unit (StateDirectory=%s: want %%S/NAME)", data, strings.Join(states, " "))
}

// envLine matches a line of an environment file, commented out or not.
var envLine = regexp.MustCompile(`^#?\s*([A-Za-z_][A-Za-z0-9_]*)=(.*)$`)

// checkExampleEnv checks the example environment file of the unit: the
// unit reads it from /etc/edgecount (optional: "-"); every variable it
// names, commented out or not, is a setting's (ApplyEnv ignores any other
// without a word); and with them all set over a region file, and then the
// unit's flags, the configuration passes the command's validation.
func checkExampleEnv(t *testing.T, unit unitFile, u systemdUnit, args []string) {
	t.Helper()
	if got, want := unit.get("Service", "EnvironmentFile"), "-/etc/edgecount/"+u.env; got != want {
		t.Errorf("EnvironmentFile=%s; want %s (its example is deploy/systemd/%s)", got, want, u.env)
	}
	f, err := os.Open(filepath.Join(systemdDir, u.env))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	known := map[string]bool{}
	for _, s := range config.Settings() {
		if s.Env != "" {
			known[s.Env] = true
		}
	}
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		m := envLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		if !known[m[1]] {
			t.Errorf("%s:%d: %s is no setting's variable (see docs/configuration.md)", u.env, n, m[1])
		}
		vars[m[1]] = m[2]
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(vars) == 0 {
		t.Fatalf("%s names no variable", u.env)
	}
	// The region file stands in for /etc/edgecount/*.yaml, and the
	// flags are applied as the command applies them (cmd/internal/cli).
	cfg := config.Default()
	if err := cfg.LoadFile("../deploy/regions/us-east.yaml"); err != nil {
		t.Fatal(err)
	}
	errs := []error{cfg.ApplyEnv(func(k string) string { return vars[k] })}
	for _, s := range config.Settings() {
		if v, ok := flagValue(args, s.Flag); ok && s.HasFlag(u.role) {
			errs = append(errs, s.Set(&cfg, s.Flag, expandSpecifiers(t, v)))
		}
	}
	errs = append(errs, cfg.Finish(u.role))
	for _, err := range errs {
		if err != nil {
			t.Errorf("%s over deploy/regions/us-east.yaml with the unit's flags: %v", u.env, err)
		}
	}
}

// checkStopTimeout: systemd's SIGKILL comes after the process's own bound of
// its graceful stop (agent.shutdown_timeout, then the broker drain).
func checkStopTimeout(t *testing.T, unit unitFile) {
	t.Helper()
	v := unit.get("Service", "TimeoutStopSec")
	got, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("TimeoutStopSec=%q: %v (write it as Go reads a duration, e.g. 120s)", v, err)
	}
	if bound := config.Default().Agent.ShutdownTimeout + nats.DefaultDrainTimeout; got <= bound {
		t.Errorf("TimeoutStopSec=%v; want more than the graceful stop's own bound %v", got, bound)
	}
}

// TestSystemdSysusers: the sysusers.d file creates the group the units
// run in (SupplementaryGroups), checked by systemd-sysusers on an empty
// root.
func TestSystemdSysusers(t *testing.T) {
	sysusers := needSystemd(t, "systemd-sysusers")
	file, err := filepath.Abs(filepath.Join(systemdDir, "edgecount.sysusers"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sysusers, "--root", t.TempDir(), "--dry-run", file).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-sysusers --dry-run %s: %v\n%s", file, err, out)
	}
	for _, u := range systemdUnits {
		raw, err := os.ReadFile(filepath.Join(systemdDir, u.file))
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range strings.Fields(parseUnit(t, string(raw)).get("Service", "SupplementaryGroups")) {
			if !bytes.Contains(out, []byte(fmt.Sprintf("Creating group '%s'", g))) {
				t.Errorf("%s runs in group %s, which edgecount.sysusers does not create:\n%s", u.file, g, out)
			}
		}
	}
}

// unitFile is a parsed unit: section → directive → its values in order.
type unitFile map[string]map[string][]string

// get returns the directive's last value in section ("" when unset), as
// systemd takes a single-valued directive given twice.
func (u unitFile) get(section, key string) string {
	vs := u[section][key]
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

// parseUnit parses a unit file: [Section] headers, Key=Value lines, "#" and
// ";" comments, a trailing backslash joining the next line.
func parseUnit(t *testing.T, s string) unitFile {
	t.Helper()
	u := unitFile{}
	section := ""
	lines := strings.Split(s, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, `\`) + " " + strings.TrimSpace(lines[i])
		}
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
			if u[section] == nil {
				u[section] = map[string][]string{}
			}
		default:
			key, value, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("unit line %d: %q is neither a section nor Key=Value", i+1, line)
			}
			key = strings.TrimSpace(key)
			u[section][key] = append(u[section][key], strings.TrimSpace(value))
		}
	}
	if u["Service"] == nil {
		t.Fatal("unit has no [Service] section")
	}
	return u
}
